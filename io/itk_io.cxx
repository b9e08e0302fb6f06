/* itk_io.cxx -- NRRD and MetaImage files, and single DICOM slices, through ITK's image I/O
 * classes used directly (no image templates, no factories: one light translation unit).
 * Every ITK call runs inside a try block; nothing is thrown across the C interface.
 * Built only with ITK; itk_stub.c stands in without it. */
#include "io_internal.h"

#include <cctype>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <itkGDCMImageIO.h>
#include <itkMetaImageIO.h>
#include <itkNrrdImageIO.h>

#include <NrrdIO.h> /* ITK's teem, its names prefixed itk_ */
#include <gdcmTrace.h>
#include <metaImage.h>
#include <zlib.h>

#include <iostream>
#include <memory>
#include <mutex>
#include <new>
#include <sstream>
#include <streambuf>
#include <string>
#include <vector>

using Comp = itk::IOComponentEnum;

namespace {

/* MetaIO writes its complaints to std::cerr; a library must not print. While any call of
 * ours runs, std::cerr and std::cout go nowhere (our errors come back as messages). */
struct NullBuf : std::streambuf {
    int overflow(int c) override { return c == EOF ? 0 : c; }
};
std::mutex g_quiet_mu;
int g_quiet_n;
std::streambuf *g_saved_err, *g_saved_out;
NullBuf g_null;

struct Quiet {
    Quiet() {
        static std::once_flag once;
        std::call_once(once, [] {
            itk::Object::GlobalWarningDisplayOff();
            gdcm::Trace::SetWarning(false);
            gdcm::Trace::SetError(false);
            gdcm::Trace::SetDebug(false);
        });
        std::lock_guard<std::mutex> l(g_quiet_mu);
        if (g_quiet_n++ == 0) {
            g_saved_err = std::cerr.rdbuf(&g_null);
            g_saved_out = std::cout.rdbuf(&g_null);
        }
    }
    ~Quiet() {
        std::lock_guard<std::mutex> l(g_quiet_mu);
        if (--g_quiet_n == 0) {
            std::cerr.rdbuf(g_saved_err);
            std::cout.rdbuf(g_saved_out);
        }
    }
    Quiet(const Quiet &) = delete;
    Quiet &operator=(const Quiet &) = delete;
};

const char *format_name(swi_io_format f) {
    return f == SWI_IO_NRRD ? "NRRD" : f == SWI_IO_METAIMAGE ? "MetaImage" : "DICOM";
}

itk::ImageIOBase::Pointer make_io(swi_io_format f) {
    if (f == SWI_IO_NRRD) return itk::NrrdImageIO::New().GetPointer();
    if (f == SWI_IO_METAIMAGE) return itk::MetaImageIO::New().GetPointer();
    return itk::GDCMImageIO::New().GetPointer();
}

/* Bytes of a component type swi reads; 0 for the others. */
int comp_bytes(Comp c) {
    switch (c) {
    case Comp::UCHAR:
    case Comp::CHAR: return 1;
    case Comp::USHORT:
    case Comp::SHORT: return 2;
    case Comp::UINT:
    case Comp::INT:
    case Comp::FLOAT: return 4;
    case Comp::ULONG:
    case Comp::LONG: return (int)sizeof(long);
    case Comp::ULONGLONG:
    case Comp::LONGLONG:
    case Comp::DOUBLE: return 8;
    default: return 0;
    }
}

swi_io_type io_type(Comp c) {
    switch (c) {
    case Comp::UCHAR: return SWI_IO_TYPE_UINT8;
    case Comp::CHAR: return SWI_IO_TYPE_INT8;
    case Comp::USHORT: return SWI_IO_TYPE_UINT16;
    case Comp::SHORT: return SWI_IO_TYPE_INT16;
    case Comp::UINT: return SWI_IO_TYPE_UINT32;
    case Comp::INT: return SWI_IO_TYPE_INT32;
    case Comp::ULONG: return sizeof(long) == 8 ? SWI_IO_TYPE_UINT64 : SWI_IO_TYPE_UINT32;
    case Comp::LONG: return sizeof(long) == 8 ? SWI_IO_TYPE_INT64 : SWI_IO_TYPE_INT32;
    case Comp::ULONGLONG: return SWI_IO_TYPE_UINT64;
    case Comp::LONGLONG: return SWI_IO_TYPE_INT64;
    case Comp::DOUBLE: return SWI_IO_TYPE_FLOAT64;
    default: return SWI_IO_TYPE_FLOAT32;
    }
}

/* src (ITK order, i fastest) -> dst [ni][nj][nk], blocked along k like the NIfTI reader. */
template <typename T> void transpose_in(const void *src, const int64_t size[3], float *dst) {
    const T *s = static_cast<const T *>(src);
    const int64_t ni = size[0], nj = size[1], nk = size[2], plane = ni * nj, KB = 16;
    for (int64_t k0 = 0; k0 < nk; k0 += KB) {
        int64_t kn = nk - k0 < KB ? nk - k0 : KB;
        for (int64_t j = 0; j < nj; j++)
            for (int64_t i = 0; i < ni; i++) {
                float *d = dst + (i * nj + j) * nk + k0;
                const T *p = s + i + ni * (j + nj * k0);
                for (int64_t kk = 0; kk < kn; kk++) d[kk] = (float)p[kk * plane];
            }
    }
}

template <typename T> void plain_in(const void *src, int64_t count, float *dst) {
    const T *s = static_cast<const T *>(src);
    for (int64_t x = 0; x < count; x++) dst[x] = (float)s[x];
}

/* Convert count voxels of component c; with size != NULL transposed as a volume. */
void convert(Comp c, const void *src, const int64_t *size, int64_t count, float *dst) {
#define SWI_CASE(E, T) \
    case Comp::E: size ? transpose_in<T>(src, size, dst) : plain_in<T>(src, count, dst); break
    switch (c) {
        SWI_CASE(UCHAR, unsigned char);
        SWI_CASE(CHAR, signed char);
        SWI_CASE(USHORT, unsigned short);
        SWI_CASE(SHORT, short);
        SWI_CASE(UINT, unsigned int);
        SWI_CASE(INT, int);
        SWI_CASE(ULONG, unsigned long);
        SWI_CASE(LONG, long);
        SWI_CASE(ULONGLONG, unsigned long long);
        SWI_CASE(LONGLONG, long long);
        SWI_CASE(FLOAT, float);
        SWI_CASE(DOUBLE, double);
    default: break;
    }
#undef SWI_CASE
}

/* An ITK message without ITK's object address, and of teem's chain of complaints only the
 * last, most specific one. */
std::string describe(const itk::ExceptionObject &e) {
    std::string d = e.GetDescription() ? e.GetDescription() : "";
    size_t at = d.find("ERROR: ");
    if (at != std::string::npos && (at = d.find("): ", at)) != std::string::npos) d = d.substr(at + 3);
    if ((at = d.rfind("[nrrd] ")) != std::string::npos) {
        d = d.substr(at + 7);
        size_t colon = d.find(": ");
        if (colon != std::string::npos && d.find(' ') > colon)
            d = d.substr(colon + 2); /* teem's function name */
    }
    while (!d.empty() && (d.back() == '\n' || d.back() == ' ')) d.pop_back();
    return d.empty() ? "unreadable" : d;
}

/* The image information of io as swi_volume fields; 0 or an error message. */
swi_status take_info(itk::ImageIOBase *io, const char *path, swi_io_format f, swi_volume *v, char *err,
                     size_t n) {
    const char *what = format_name(f);
    unsigned nd = io->GetNumberOfDimensions();
    if (nd < 2 || nd > 16) {
        io__err(err, n, "%s: %s image of %u dimensions; swi segments 3-D volumes", path, what, nd);
        return SWI_ERR_INVALID_ARG;
    }
    int64_t dim[16];
    for (unsigned a = 0; a < nd; a++) dim[a] = (int64_t)io->GetDimensions(a);
    unsigned eff = nd;
    while (eff > 3 && dim[eff - 1] == 1) eff--;
    if (eff != 3 && f != SWI_IO_DICOM) {
        io__err(err, n, "%s: is a %u-D image; swi segments 3-D volumes (4th dim 1 is fine)", path, eff);
        return SWI_ERR_INVALID_ARG;
    }
    if (io->GetNumberOfComponents() != 1) {
        io__err(err, n,
                "%s: %u components per voxel (a vector or colour image); swi reads "
                "scalar volumes",
                path, io->GetNumberOfComponents());
        return SWI_ERR_INVALID_ARG;
    }
    Comp c = io->GetComponentType();
    int nb = comp_bytes(c);
    if (nb == 0) {
        io__err(err, n, "%s: unsupported voxel type %s", path,
                itk::ImageIOBase::GetComponentTypeAsString(c).c_str());
        return SWI_ERR_INVALID_ARG;
    }
    int64_t size[3] = {dim[0], dim[1], nd >= 3 ? dim[2] : 1};
    int64_t nvox = 1;
    for (int a = 0; a < 3; a++) {
        if (size[a] < 1 || size[a] > IO_MAX_VOXELS / nvox) {
            io__err(err, n,
                    "%s: header sizes %lld x %lld x %lld are not a volume swi accepts "
                    "(each >= 1, at most 2^40 voxels)",
                    path, (long long)size[0], (long long)size[1], (long long)size[2]);
            return SWI_ERR_INVALID_ARG;
        }
        nvox *= size[a];
    }
    double sp[3], org[3], dir[3][3]; /* dir[r][c]: column c is axis c's direction */
    for (unsigned a = 0; a < 3; a++) {
        sp[a] = a < nd ? io->GetSpacing(a) : 1.0;
        org[a] = a < nd ? io->GetOrigin(a) : 0.0;
        std::vector<double> d = a < nd ? io->GetDirection(a) : std::vector<double>();
        for (unsigned r = 0; r < 3; r++) dir[r][a] = r < d.size() ? d[r] : (r == a ? 1.0 : 0.0);
        if (!(sp[a] > 0) || !std::isfinite(sp[a]) || !std::isfinite(org[a])) {
            io__err(err, n,
                    "%s: corrupt geometry: spacing[%u] = %g, origin[%u] = %g (spacing "
                    "must be positive, both finite)",
                    path, a, sp[a], a, org[a]);
            return SWI_ERR_INVALID_ARG;
        }
    }
    for (int r = 0; r < 3; r++)
        for (int k = 0; k < 3; k++)
            if (!std::isfinite(dir[r][k])) {
                io__err(err, n, "%s: corrupt geometry: direction is not finite", path);
                return SWI_ERR_INVALID_ARG;
            }
    v->format = f;
    memcpy(v->size, size, sizeof v->size);
    v->type = io_type(c);
    v->bytes_per_voxel = nb;
    v->slope = 1;
    v->inter = 0;
    v->fmt.itk.component = (int)c;
    memset(v->affine, 0, sizeof v->affine);
    for (int r = 0; r < 3; r++) {
        double flip = r < 2 ? -1.0 : 1.0; /* LPS -> RAS */
        for (int k = 0; k < 3; k++) v->affine[r][k] = flip * dir[r][k] * sp[k];
        v->affine[r][3] = flip * org[r];
        v->spacing[r] = sp[r];
    }
    v->affine[3][3] = 1;
    return SWI_OK;
}

int set_path(swi_volume *v, const char *path, char *err, size_t n) {
    if (strlen(path) >= sizeof v->path) {
        io__err(err, n, "%.200s...: path too long", path);
        return -1;
    }
    strcpy(v->path, path);
    return 0;
}

/* teem (under NrrdImageIO) keeps its error messages in global state, and MetaIO and GDCM
 * have globals of their own: one ITK call at a time (swi's folder mode reads the next case
 * while the current one's output is written). */
std::mutex g_itk_mu;

/* Runs body, turning what ITK throws into a status and a message about path. */
template <typename F> swi_status guarded(const char *path, const char *what, char *err, size_t n, F body) {
    try {
        std::lock_guard<std::mutex> one_at_a_time(g_itk_mu);
        Quiet q;
        return body();
    } catch (const itk::ExceptionObject &e) {
        io__err(err, n, "%s: corrupt or unreadable %s data: %s", path, what, describe(e).c_str());
        return SWI_ERR_INVALID_ARG;
    } catch (const std::bad_alloc &) {
        io__err(err, n, "%s: out of memory", path);
        return SWI_ERR_NOMEM;
    } catch (const std::exception &e) {
        io__err(err, n, "%s: %s: %s", path, what, e.what());
        return SWI_ERR_INVALID_ARG;
    } catch (...) {
        io__err(err, n, "%s: %s: unknown error", path, what);
        return SWI_ERR_INVALID_ARG;
    }
}

/* MetaIO and teem format a numbered series' file name (slice%03d.raw 1 40 1) with sprintf,
 * the name as the format and an int as its one argument: any other conversion (%n, %s)
 * writes or reads through garbage (found by fuzz_itk_headers), and teem's buffer has room
 * for 10 characters more than the name (a width of 99 overflowed it). At most one
 * %[0-9]*d or %[0-9]*i of width at most 11 (an int's widest), and %% for a percent sign. */
bool file_pattern_ok(const std::string &v) {
    int ints = 0;
    for (size_t i = 0; i < v.size(); i++) {
        if (v[i] != '%') continue;
        if (i + 1 < v.size() && v[i + 1] == '%') {
            i++;
            continue;
        }
        size_t j = i + 1;
        int width = 0;
        while (j < v.size() && v[j] >= '0' && v[j] <= '9' && width <= 11) width = width * 10 + (v[j++] - '0');
        if (j >= v.size() || (v[j] != 'd' && v[j] != 'i') || ++ints > 1 || width > 11) return false;
        i = j;
    }
    return true;
}

/* The first `max` bytes of a file into head; false (errno set) when it cannot be opened. */
bool read_head(const char *path, size_t max, std::string &head) {
    int fd = swi_io_open_regular(path, NULL, NULL, 0); /* never blocks on a FIFO */
    FILE *f = fd >= 0 ? fdopen(fd, "rb") : NULL;
    if (!f) {
        if (fd >= 0) close(fd);
        return false;
    }
    head.assign(max, '\0');
    size_t got = fread(&head[0], 1, head.size(), f);
    fclose(f);
    head.resize(got);
    return true;
}

/* The line of head that starts at `at` (without its newline); `at` moves past it. */
std::string next_line(const std::string &head, size_t &at) {
    size_t eol = head.find('\n', at);
    std::string line = head.substr(at, eol == std::string::npos ? std::string::npos : eol - at);
    at = eol == std::string::npos ? head.size() : eol + 1;
    return line;
}

std::vector<std::string> split_words(const std::string &v);

/* A data file a header names, relative to the header's folder: teem and MetaIO open it by
 * name, and a FIFO or device there would block them forever, so it must be a regular file. */
swi_status check_data_file(const char *path, const std::string &name, const char *what, char *err, size_t n) {
    std::string file = name;
    size_t slash = std::string(path).rfind('/');
    if (!file.empty() && file[0] != '/' && slash != std::string::npos)
        file = std::string(path).substr(0, slash + 1) + file;
    char why[1024];
    if (file.empty() || swi_io_check_regular(file.c_str(), NULL, why, sizeof why) != SWI_OK) {
        io__err(err, n, "%s: %s: %s", path, what, file.empty() ? "no file named" : why);
        return SWI_ERR_INVALID_ARG;
    }
    return SWI_OK;
}

/* The files of a numbered series "FORMAT FIRST LAST STEP" (FORMAT screened by
 * file_pattern_ok: one %d or %i, width at most 11), each checked by check_data_file. */
swi_status check_data_series(const char *path, const std::vector<std::string> &w, const char *what, char *err,
                             size_t n) {
    if (w.size() < 4) return check_data_file(path, w.empty() ? std::string() : w[0], what, err, n);
    char *e1 = NULL, *e2 = NULL, *e3 = NULL;
    long long first = strtoll(w[1].c_str(), &e1, 10), last = strtoll(w[2].c_str(), &e2, 10),
              step = strtoll(w[3].c_str(), &e3, 10);
    const long long big = 1LL << 40; /* keeps last - first and k + step from overflowing */
    if (*e1 || *e2 || *e3 || step == 0 || llabs(first) > big || llabs(last) > big || llabs(step) > big ||
        (last - first) / step < 0 || (last - first) / step >= (1 << 16)) {
        io__err(err, n, "%s: %s: a numbered series needs FIRST LAST STEP of at most 65536 files", path, what);
        return SWI_ERR_INVALID_ARG;
    }
    const std::string &fmt = w[0];
    size_t at = std::string::npos;
    for (size_t i = 0; i < fmt.size(); i++)
        if (fmt[i] == '%') {
            if (i + 1 < fmt.size() && fmt[i + 1] == '%') {
                i++;
                continue;
            }
            at = i;
            break;
        }
    for (long long k = first;; k += step) {
        std::string name;
        for (size_t i = 0; i < fmt.size(); i++) {
            if (i == at) {
                size_t j = i + 1;
                bool zero = j < fmt.size() && fmt[j] == '0';
                int width = 0;
                while (j < fmt.size() && fmt[j] >= '0' && fmt[j] <= '9')
                    width = width * 10 + (fmt[j++] - '0');
                char num[64];
                snprintf(num, sizeof num, zero ? "%0*lld" : "%*lld", width, k);
                name += num;
                i = j; /* the d or i */
            } else {
                name += fmt[i];
                if (fmt[i] == '%' && i + 1 < fmt.size() && fmt[i + 1] == '%') i++;
            }
        }
        if (swi_status st = check_data_file(path, name, what, err, n)) return st;
        if (k == last || (step > 0 ? k + step > last : k + step < last)) break;
    }
    return SWI_OK;
}

/* teem checks only the first conversion of a NRRD "data file: FORMAT MIN MAX STEP" (see
 * file_pattern_ok): its header lines, up to the blank line that ends them (at most 1 MB of
 * them), are screened for that field before teem parses them. */
swi_status check_nrrd_header(const char *path, char *err, size_t n) {
    std::string head;
    const size_t max = 1 << 20;
    if (!read_head(path, max, head)) {
        io__err(err, n, "%s: cannot open: %s", path, strerror(errno));
        return SWI_ERR_INVALID_ARG;
    }
    for (size_t at = 0;;) {
        if (at >= head.size()) {
            if (head.size() < max) break;
            io__err(err, n, "%s: corrupt NRRD header: no blank line ends it in its first 1 MB", path);
            return SWI_ERR_INVALID_ARG;
        }
        std::string line = next_line(head, at);
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (line.empty()) break;
        size_t colon = line.find(':');
        if (colon == std::string::npos) continue;
        std::string key = line.substr(0, colon);
        if (key != "data file" && key != "datafile") continue;
        size_t b = line.find_first_not_of(" \t", colon + 1);
        std::string name = b == std::string::npos ? std::string() : line.substr(b);
        name = name.substr(0, name.find_first_of(" \t"));
        if (!file_pattern_ok(name)) {
            io__err(err, n,
                    "%s: NRRD data file may hold one %%d of width at most 11 (a numbered file series) and no "
                    "other %% conversion",
                    path);
            return SWI_ERR_INVALID_ARG;
        }
        if (name == "LIST") {
            /* the lines after it are file names, to the end of the file */
            while (at < head.size()) {
                std::string file = next_line(head, at);
                if (!file.empty() && file.back() == '\r') file.pop_back();
                if (file.empty()) continue;
                if (swi_status st = check_data_file(path, file, "data file LIST", err, n)) return st;
            }
            break;
        }
        std::vector<std::string> words = split_words(line.substr(colon + 1));
        if (words.size() >= 4 && name.find('%') != std::string::npos) {
            if (swi_status st = check_data_series(path, words, "data file", err, n)) return st;
        } else {
            /* not a series: teem takes the whole value as the name, blanks included */
            std::string whole = b == std::string::npos ? std::string() : line.substr(b);
            while (!whole.empty() && (whole.back() == ' ' || whole.back() == '\t')) whole.pop_back();
            if (swi_status st = check_data_file(path, whole, "data file", err, n)) return st;
        }
    }
    return SWI_OK;
}

/* The bytes of a NRRD's header in its own file: up to the blank line that ends it
 * (check_nrrd_header has screened it within its first 1 MB). */
int64_t nrrd_header_bytes(const char *path) {
    std::string head;
    if (!read_head(path, 1 << 20, head)) return -1;
    for (size_t at = 0; at < head.size();) {
        std::string line = next_line(head, at);
        if (line.empty() || line == "\r") return (int64_t)at;
    }
    return (int64_t)head.size();
}

/* teem (under NrrdImageIO) allocates all the voxels a header claims before it reads them:
 * the claim is checked first against the data teem would read them from. Its own header
 * reader (skipData: no voxel is read or allocated) names the data files and encoding; raw
 * data must be all there, ascii and hex at their fewest characters per value, and gzip
 * data within deflate's largest expansion. */
swi_status check_nrrd_data(const char *path, uint64_t bytes, uint64_t count, char *err, size_t n) {
    Nrrd *nrrd = nrrdNew();
    NrrdIoState *nio = nrrdIoStateNew();
    if (!nrrd || !nio) {
        if (nrrd) nrrdNix(nrrd);
        if (nio) nrrdIoStateNix(nio);
        io__err(err, n, "%s: out of memory", path);
        return SWI_ERR_NOMEM;
    }
    nio->skipData = AIR_TRUE;
    swi_status st = SWI_OK;
    if (nrrdLoad(nrrd, path, nio)) {
        char *e = biffGetDone(NRRD);
        std::string d = e ? e : "unreadable";
        free(e);
        while (!d.empty() && (d.back() == '\n' || d.back() == ' ')) d.pop_back();
        size_t at = d.rfind("] ");
        io__err(err, n, "%s: corrupt or unreadable NRRD data: %s", path,
                at == std::string::npos ? d.c_str() : d.c_str() + at + 2);
        st = SWI_ERR_INVALID_ARG;
    }
    std::vector<std::string> files;
    const bool attached = st == SWI_OK && !nio->dataFNFormat && nio->dataFNArr->len == 0;
    if (st == SWI_OK && nio->dataFNFormat) {
        const int step = nio->dataFNStep;
        for (int i = nio->dataFNMin; step != 0 && (step > 0 ? i <= nio->dataFNMax : i >= nio->dataFNMax) &&
                                     files.size() <= (1u << 20);
             i += step) {
            char name[4096];
            /* the format holds one %d at most (check_nrrd_header) */
            snprintf(name, sizeof name, nio->dataFNFormat, i);
            files.push_back(name);
        }
    } else if (st == SWI_OK) {
        for (unsigned i = 0; i < nio->dataFNArr->len && files.size() <= (1u << 20); i++)
            files.push_back(nio->dataFN[i]);
    }
    if (attached) files.push_back(path);
    if (st == SWI_OK && files.size() > (1u << 20)) {
        io__err(err, n, "%s: NRRD data file: more than %u files", path, 1u << 20);
        st = SWI_ERR_INVALID_ARG;
    }
    std::string encoding = st == SWI_OK && nio->encoding ? nio->encoding->name : "";
    for (char &ch : encoding) ch = (char)tolower((unsigned char)ch);
    const long skip = st == SWI_OK ? nio->byteSkip : 0;
    const std::string dir = st == SWI_OK && nio->path ? std::string(nio->path) + "/" : std::string();
    nrrdNix(nrrd);
    nrrdIoStateNix(nio);
    if (st != SWI_OK) return st;
    const int64_t header = attached ? nrrd_header_bytes(path) : 0;
    uint64_t have = 0; /* bytes the voxels can come from */
    for (std::string file : files) {
        if (!attached && file[0] != '/') file = dir + file;
        struct stat fs;
        if (file.size() >= 4000 || stat(file.c_str(), &fs) != 0 || !S_ISREG(fs.st_mode)) {
            io__err(err, n, "%s: NRRD data file %.2000s is %s", path, file.c_str(),
                    file.size() >= 4000 || errno == ENOENT ? "missing" : "not a regular file");
            return SWI_ERR_INVALID_ARG;
        }
        int64_t from = header < 0 ? 0 : header;
        if (skip > 0 && encoding == "raw") from += skip;
        have += fs.st_size > from ? (uint64_t)(fs.st_size - from) : 0;
    }
    const char *held = files.size() == 1 ? "holds" : "hold";
    uint64_t need = bytes;
    const char *unit = "bytes of voxels";
    if (encoding == "gzip") {
        if (have >= bytes / IO_DEFLATE_MAX_RATIO + 1) return SWI_OK;
        char b[32];
        io__err(
            err, n,
            "%s: the header claims %s of voxels, more than the %llu compressed bytes of its data can hold "
            "(deflate inflates at most %d:1)",
            path, io__bytes((size_t)bytes, b), (unsigned long long)have, IO_DEFLATE_MAX_RATIO);
        return SWI_ERR_INVALID_ARG;
    }
    if (encoding == "hex") {
        need = 2 * bytes;
        unit = "hex digits";
    } else if (encoding == "ascii") {
        need = count;
        unit = "characters (one value each at least)";
    } else if (encoding != "raw") {
        return SWI_OK; /* teem's other encodings are not built into ITK's copy */
    }
    if (have >= need) return SWI_OK;
    io__err(err, n,
            "%s: truncated: the header claims %llu voxels (%llu %s) but its data file%s %s %llu bytes", path,
            (unsigned long long)count, (unsigned long long)need, unit, files.size() == 1 ? "" : "s", held,
            (unsigned long long)have);
    return SWI_ERR_INVALID_ARG;
}

/* MetaIO loops over array fields (TransformMatrix, DimSize, ...) by the NDims it has read
 * so far, uninitialised when none came first, and reads a header without an
 * ElementDataFile line to the end of the file: hostile headers hang it. Before MetaIO
 * sees a header, NDims (1..16) must come before every other field, DimSize and ElementType
 * before ElementDataFile, which must end the header, every line must be printable text,
 * and no field may hold more numbers than NDims x NDims (heap corruption and reads past
 * MetaIO's buffers were found by fuzz_itk_headers beyond these). */
swi_status check_meta_header(const char *path, char *err, size_t n) {
    std::string head;
    if (!read_head(path, 1 << 16, head)) {
        io__err(err, n, "%s: cannot open: %s", path, strerror(errno));
        return SWI_ERR_INVALID_ARG;
    }
    int ndims = 0;
    bool dimsize = false, elemtype = false;
    for (size_t at = 0; at < head.size();) {
        std::string line = next_line(head, at);
        for (unsigned char ch : line)
            if ((ch < 0x20 && ch != '\t' && ch != '\r') || ch > 0x7e) {
                io__err(err, n, "%s: corrupt MetaImage header: a line holds binary data", path);
                return SWI_ERR_INVALID_ARG;
            }
        if (line.size() > 4000) {
            io__err(err, n, "%s: corrupt MetaImage header: a line of %zu characters", path, line.size());
            return SWI_ERR_INVALID_ARG;
        }
        size_t eq = line.find('=');
        if (eq == std::string::npos) continue;
        std::string key = line.substr(0, eq);
        static const char *const arrays[] = {
            "TransformMatrix", "Rotation",         "Orientation",    "Offset",      "Position",
            "Origin",          "CenterOfRotation", "ElementSpacing", "ElementSize", "DimSize"};
        bool numeric = false;
        for (const char *a : arrays) numeric = numeric || key.find(a) != std::string::npos;
        if (ndims && numeric) {
            size_t words = 0;
            for (size_t i = eq + 1; i < line.size(); i++)
                words += line[i] != ' ' && line[i] != '\t' &&
                         (i == eq + 1 || line[i - 1] == ' ' || line[i - 1] == '\t');
            if (words > (size_t)(ndims * ndims)) {
                io__err(err, n, "%s: corrupt MetaImage header: %zu values in one field", path, words);
                return SWI_ERR_INVALID_ARG;
            }
        }
        while (!key.empty() && (key.back() == ' ' || key.back() == '\t')) key.pop_back();
        while (!key.empty() && (key[0] == ' ' || key[0] == '\t')) key.erase(0, 1);
        if (key == "NDims") {
            char *end = NULL;
            long v = strtol(line.c_str() + eq + 1, &end, 10);
            while (end && (*end == ' ' || *end == '\r' || *end == '\t')) end++;
            if (v < 1 || v > 16 || !end || *end) {
                io__err(err, n, "%s: corrupt MetaImage header: NDims must be 1..16", path);
                return SWI_ERR_INVALID_ARG;
            }
            ndims = (int)v;
        } else if (key == "ElementDataFile") {
            if (!ndims) break;
            if (!dimsize || !elemtype) { /* MetaIO reads past its buffers without them */
                io__err(err, n, "%s: corrupt MetaImage header: no %s before ElementDataFile", path,
                        !dimsize ? "DimSize" : "ElementType");
                return SWI_ERR_INVALID_ARG;
            }
            if (!file_pattern_ok(line.substr(eq + 1))) {
                io__err(err, n,
                        "%s: MetaImage ElementDataFile may hold one %%d (a numbered file series) and "
                        "no other %% conversion",
                        path);
                return SWI_ERR_INVALID_ARG;
            }
            return SWI_OK;
        } else if (key == "DimSize" && ndims) {
            dimsize = true;
        } else if (key == "ElementType" && ndims) {
            elemtype = true;
        } else if (!ndims && key != "ObjectType" && key != "Comment" && key != "ObjectSubType" &&
                   key != "FormTypeName" && key != "Name") {
            io__err(err, n, "%s: MetaImage header field %.40s comes before NDims", path, key.c_str());
            return SWI_ERR_INVALID_ARG;
        }
    }
    io__err(err, n, "%s: corrupt MetaImage header: %s", path,
            ndims ? "no ElementDataFile line in its first 64 KB" : "no NDims line");
    return SWI_ERR_INVALID_ARG;
}

/* Where a MetaImage's voxel data start in its own file: after the ElementDataFile line. */
int64_t local_data_offset(const char *path) {
    std::string head;
    if (!read_head(path, 1 << 20, head)) return -1;
    for (size_t at = 0; (at = head.find("ElementDataFile", at)) != std::string::npos; at++) {
        if (at > 0 && head[at - 1] != '\n') continue;
        size_t eol = head.find('\n', at);
        return eol == std::string::npos ? -1 : (int64_t)eol + 1;
    }
    return -1;
}

/* A header value's words, split at blanks as MetaIO's MET_StringToWordArray does. */
std::vector<std::string> split_words(const std::string &v) {
    std::vector<std::string> words;
    for (size_t at = 0; at < v.size();) {
        size_t b = v.find_first_not_of(" \t", at);
        if (b == std::string::npos) break;
        size_t e = v.find_first_of(" \t", b);
        words.push_back(v.substr(b, e == std::string::npos ? std::string::npos : e - b));
        at = e == std::string::npos ? v.size() : e;
    }
    return words;
}

/* Whether a file holds at least `need` bytes (any size when compressed); else a message. */
bool slice_file_ok(const std::string &file, uint64_t need, bool compressed, const char *path,
                   const char *what, char *err, size_t n) {
    struct stat st;
    if (file.size() >= 2000 || stat(file.c_str(), &st) != 0) {
        io__err(err, n, "%s: %s: the file %.2000s is missing", path, what, file.c_str());
        return false;
    }
    if (!S_ISREG(st.st_mode)) { /* MetaIO would block on a FIFO, read nothing from a folder */
        io__err(err, n, "%s: %s: %s is %s, not a regular file", path, what, file.c_str(),
                swi_io_file_kind((unsigned)st.st_mode));
        return false;
    }
    if (!compressed && (uint64_t)st.st_size < need) {
        io__err(err, n, "%s: %s: %s holds %lld bytes, and its slice needs %llu", path, what, file.c_str(),
                (long long)st.st_size, (unsigned long long)need);
        return false;
    }
    return true;
}

/* A numbered series' ElementDataFile is "NAME [FIRST [LAST [STEP]]]": MetaIO reads files
 * FIRST, FIRST+STEP, ... up to LAST, at most one per slice, STEP taken as (LAST-FIRST)/slices
 * when it is not given. It divides by STEP (a zero STEP raised SIGFPE: found by
 * fuzz_itk_headers), loops forever on a negative one, and reads a missing or short file as
 * zeros: so STEP must be at least 1, the files must be one per slice, and each must exist and
 * hold its slice. */
swi_status check_meta_series(MetaImage *mi, const std::string &dir, const char *path, uint64_t bytes,
                             char *err, size_t n) {
    std::string spec = mi->ElementDataFileName();
    std::vector<std::string> words = split_words(spec);
    int nd = mi->NDims();
    int64_t slices = nd >= 1 ? mi->DimSize()[nd - 1] : 0;
    int64_t num[3] = {0, 0, 0};
    bool ok = words.size() >= 1 && words.size() <= 4 && slices >= 1 && words[0].size() <= 1000;
    for (size_t w = 1; ok && w < words.size(); w++) {
        const std::string &t = words[w];
        size_t d = t[0] == '-' ? 1 : 0;
        ok = t.size() > d && t.size() - d <= 9 && t.find_first_not_of("0123456789", d) == std::string::npos;
        if (ok) num[w - 1] = std::stoll(t);
    }
    if (!ok) {
        io__err(err, n,
                "%s: a numbered MetaImage series needs ElementDataFile = NAME [FIRST [LAST [STEP]]], a name "
                "without spaces and whole numbers (it has \"%.80s\")",
                path, spec.c_str());
        return SWI_ERR_INVALID_ARG;
    }
    int64_t first = words.size() >= 2 ? num[0] : 1, last = first + slices - 1, step = 1;
    if (words.size() >= 3) {
        last = num[1];
        step = (last - first) / slices;
    }
    if (words.size() >= 4) step = num[2];
    if (step < 1) {
        io__err(err, n, "%s: numbered MetaImage series %.80s: its step is %lld, and must be at least 1", path,
                spec.c_str(), (long long)step);
        return SWI_ERR_INVALID_ARG;
    }
    int64_t files = last < first ? 0 : (last - first) / step + 1;
    if (files < slices) {
        io__err(err, n, "%s: numbered MetaImage series %.80s names %lld files for %lld slices", path,
                spec.c_str(), (long long)files, (long long)slices);
        return SWI_ERR_INVALID_ARG;
    }
    /* the one conversion is %[0][width]d or i (check_meta_header screened the name) */
    const std::string &name = words[0];
    uint64_t slice_bytes = bytes / (uint64_t)slices;
    for (int64_t k = 0; k < slices; k++) { /* MetaIO reads the first `slices` of them */
        std::string file;
        for (size_t i = 0; i < name.size(); i++) {
            if (name[i] != '%') {
                file += name[i];
            } else if (name[i + 1] == '%') {
                file += '%';
                i++;
            } else {
                size_t j = i + 1;
                bool zero = name[j] == '0';
                int width = 0;
                for (; name[j] >= '0' && name[j] <= '9'; j++) width = width * 10 + (name[j] - '0');
                char num_text[64];
                snprintf(num_text, sizeof num_text, zero ? "%0*lld" : "%*lld", width,
                         (long long)(first + k * step));
                file += num_text;
                i = j;
            }
        }
        if (file[0] != '/') file = dir + file;
        if (!slice_file_ok(file, slice_bytes, mi->CompressedData(), path, "numbered MetaImage series", err,
                           n))
            return SWI_ERR_INVALID_ARG;
    }
    return SWI_OK;
}

/* ElementDataFile = LIST [ND] names one file per line after it, each holding an N-D part
 * (N = NDims-1 unless given). MetaIO reads a missing file as zeros, indexes its arrays
 * with a negative N, reads before the line's buffer on an empty line, and skips a last line
 * without a newline: so N must be a small whole number, and the header must go on with one
 * nonempty line per part, each ending in a newline and naming a file that holds its part. */
swi_status check_meta_list(MetaImage *mi, const std::string &dir, const char *path, uint64_t bytes, char *err,
                           size_t n) {
    std::vector<std::string> words = split_words(mi->ElementDataFileName());
    int nd = mi->NDims(), part_dims = nd - 1;
    if (words.size() > 2 ||
        (words.size() == 2 &&
         (words[1].size() > 3 || words[1].find_first_not_of("0123456789Dd") != std::string::npos ||
          words[1][0] < '0' || words[1][0] > '9'))) {
        io__err(err, n,
                "%s: MetaImage ElementDataFile = LIST takes at most the dimension of each file (LIST 2D)",
                path);
        return SWI_ERR_INVALID_ARG;
    }
    if (words.size() == 2) {
        int d = atoi(words[1].c_str());
        if (d >= 1 && d <= nd) part_dims = d;
    }
    int64_t parts = 1;
    for (int a = nd - 1; a >= part_dims && parts <= (1 << 20); a--) parts *= mi->DimSize()[a];
    if (parts > (1 << 20)) {
        io__err(err, n, "%s: MetaImage file LIST: more than %d files", path, 1 << 20);
        return SWI_ERR_INVALID_ARG;
    }
    int64_t at = local_data_offset(path);
    FILE *f = at < 0 ? NULL : fopen(path, "rb");
    if (!f || fseek(f, (long)at, SEEK_SET) != 0) {
        if (f) fclose(f);
        io__err(err, n, "%s: MetaImage file LIST: cannot read the list after its ElementDataFile line", path);
        return SWI_ERR_INVALID_ARG;
    }
    uint64_t part_bytes = bytes / (uint64_t)parts;
    char line[1024];
    for (int64_t k = 0; k < parts; k++) {
        if (!fgets(line, sizeof line, f)) {
            fclose(f);
            io__err(err, n, "%s: MetaImage file LIST names %lld files, and %lld are needed", path,
                    (long long)k, (long long)parts);
            return SWI_ERR_INVALID_ARG;
        }
        size_t len = strlen(line);
        bool whole = len > 0 && line[len - 1] == '\n';
        while (len > 0 && (isspace((unsigned char)line[len - 1]) || !isprint((unsigned char)line[len - 1])))
            line[--len] = '\0';
        if (!whole || len == 0) {
            fclose(f);
            io__err(err, n, "%s: MetaImage file LIST: line %lld of the list is %s", path, (long long)k + 1,
                    whole ? "empty" : "too long or lacks its newline");
            return SWI_ERR_INVALID_ARG;
        }
        std::string file(line);
        if (file[0] != '/') file = dir + file;
        if (!slice_file_ok(file, part_bytes, mi->CompressedData(), path, "MetaImage file LIST", err, n)) {
            fclose(f);
            return SWI_ERR_INVALID_ARG;
        }
    }
    fclose(f);
    return SWI_OK;
}

/* MetaIO reads short or corrupt data without an error (zeros for what is missing), so the
 * data are checked first: an uncompressed file must hold them all, a compressed stream
 * must inflate to at least their size (inflate: read it through; else, when the file is
 * opened and nothing is allocated yet, its size must allow that within deflate's largest
 * expansion). */
swi_status check_meta_data(itk::MetaImageIO *mio, const char *path, uint64_t bytes, bool inflate_all,
                           char *err, size_t n) {
    MetaImage *mi = mio->GetMetaImagePointer();
    std::string file = mi->ElementDataFileName() ? mi->ElementDataFileName() : "";
    std::string dir(path);
    size_t slash = dir.rfind('/');
    dir = slash == std::string::npos ? std::string() : dir.substr(0, slash + 1);
    int64_t offset;
    if (file == "LOCAL") {
        file = path;
        offset = local_data_offset(path);
    } else if (file.compare(0, 4, "LIST") == 0) { /* MetaIO's order: LOCAL, LIST, then a series */
        return check_meta_list(mi, dir, path, bytes, err, n);
    } else if (file.find('%') != std::string::npos) {
        return check_meta_series(mi, dir, path, bytes, err, n);
    } else if (file.empty() || mi->HeaderSize() < 0) {
        return SWI_OK;
    } else {
        if (file[0] != '/') file = dir + file;
        offset = mi->HeaderSize();
    }
    struct stat st;
    if (offset < 0 || stat(file.c_str(), &st) != 0) {
        io__err(err, n, "%s: cannot find its voxel data (ElementDataFile %s)", path,
                mi->ElementDataFileName());
        return SWI_ERR_INVALID_ARG;
    }
    /* a directory would leave MetaIO's buffer unread (uninitialised voxels), a FIFO block */
    if (!S_ISREG(st.st_mode)) {
        io__err(err, n, "%s: ElementDataFile %s is %s, not a regular file", path, file.c_str(),
                swi_io_file_kind((unsigned)st.st_mode));
        return SWI_ERR_INVALID_ARG;
    }
    if (!mi->CompressedData()) {
        if ((uint64_t)st.st_size < (uint64_t)offset + bytes) {
            io__err(err, n,
                    "%s: truncated: the header describes %llu bytes of voxels but %s "
                    "holds %lld after offset %lld",
                    path, (unsigned long long)bytes, file.c_str(), (long long)(st.st_size - offset),
                    (long long)offset);
            return SWI_ERR_INVALID_ARG;
        }
        return SWI_OK;
    }
    if (!inflate_all) {
        const uint64_t have = (uint64_t)st.st_size > (uint64_t)offset ? (uint64_t)(st.st_size - offset) : 0;
        if (have >= bytes / IO_DEFLATE_MAX_RATIO + 1) return SWI_OK;
        char b[32];
        io__err(err, n,
                "%s: the header claims %s of voxels, more than the %llu compressed bytes of %s can hold "
                "(deflate inflates at most %d:1)",
                path, io__bytes((size_t)bytes, b), (unsigned long long)have, file.c_str(),
                IO_DEFLATE_MAX_RATIO);
        return SWI_ERR_INVALID_ARG;
    }
    int fd = swi_io_open_regular(file.c_str(), NULL, NULL, 0);
    FILE *f = fd >= 0 ? fdopen(fd, "rb") : NULL;
    if (!f || fseek(f, (long)offset, SEEK_SET) != 0) {
        int e = errno;
        if (f)
            fclose(f);
        else if (fd >= 0)
            close(fd);
        io__err(err, n, "%s: cannot read its voxel data: %s", path, strerror(e));
        return SWI_ERR_INVALID_ARG;
    }
    z_stream z;
    memset(&z, 0, sizeof z);
    if (inflateInit(&z) != Z_OK) {
        fclose(f);
        io__err(err, n, "%s: out of memory", path);
        return SWI_ERR_NOMEM;
    }
    std::vector<unsigned char> in(1 << 16), out(1 << 18);
    uint64_t produced = 0;
    int zr = Z_OK;
    while (produced < bytes && zr == Z_OK) {
        if (z.avail_in == 0) {
            size_t got = fread(in.data(), 1, in.size(), f);
            if (got == 0) break;
            z.next_in = in.data();
            z.avail_in = (uInt)got;
        }
        z.next_out = out.data();
        z.avail_out = (uInt)out.size();
        zr = inflate(&z, Z_NO_FLUSH);
        produced += out.size() - z.avail_out;
    }
    inflateEnd(&z);
    fclose(f);
    if (produced < bytes) {
        io__err(err, n,
                "%s: corrupt or truncated compressed voxel data (%s after %llu of %llu "
                "bytes)",
                path, zr == Z_DATA_ERROR ? "not zlib data" : "it ends", (unsigned long long)produced,
                (unsigned long long)bytes);
        return SWI_ERR_INVALID_ARG;
    }
    return SWI_OK;
}

/* Read all of io's voxels (after ReadImageInformation) into a new buffer. */
swi_status read_all(itk::ImageIOBase *io, const char *path, int64_t count, int nb,
                    std::unique_ptr<unsigned char[]> &buf, char *err, size_t n) {
    size_t bytes = (size_t)count * (size_t)nb;
    buf.reset(new (std::nothrow) unsigned char[bytes]);
    if (!buf) {
        char b[32];
        io__err(err, n, "%s: out of memory reading %s of voxels", path, io__bytes(bytes, b));
        return SWI_ERR_NOMEM;
    }
    unsigned nd = io->GetNumberOfDimensions();
    itk::ImageIORegion region(nd);
    for (unsigned a = 0; a < nd; a++) {
        region.SetIndex(a, 0);
        region.SetSize(a, io->GetDimensions(a));
    }
    io->SetIORegion(region);
    io->Read(buf.get());
    return SWI_OK;
}

} // namespace

extern "C" int io__itk_available(void) { return 1; }

extern "C" swi_status io__itk_open(const char *path, swi_io_format f, swi_volume *v, char *err, size_t n) {
    memset(v, 0, sizeof *v);
    if (set_path(v, path, err, n)) return SWI_ERR_INVALID_ARG;
    struct stat st;
    if (stat(path, &st) != 0) {
        io__err(err, n, "%s: cannot open: %s", path, strerror(errno));
        return SWI_ERR_INVALID_ARG;
    }
    if (!S_ISREG(st.st_mode)) {
        io__err(err, n, "%s: not a regular file", path);
        return SWI_ERR_INVALID_ARG;
    }
    const char *what = format_name(f);
    return guarded(path, what, err, n, [&]() -> swi_status {
        swi_status hs = f == SWI_IO_METAIMAGE ? check_meta_header(path, err, n)
                        : f == SWI_IO_NRRD    ? check_nrrd_header(path, err, n)
                                              : SWI_OK;
        if (hs) return hs;
        itk::ImageIOBase::Pointer io = make_io(f);
        if (!io->CanReadFile(path)) {
            io__err(err, n, "%s: not a %s file (no valid %s header)", path, what, what);
            return SWI_ERR_INVALID_ARG;
        }
        io->SetFileName(path);
        io->ReadImageInformation();
        swi_status is = take_info(io.GetPointer(), path, f, v, err, n);
        if (is) return is;
        /* what the header claims must be there before anyone allocates for it */
        const uint64_t count = (uint64_t)swi_volume_voxels(v), bytes = count * (uint64_t)v->bytes_per_voxel;
        if (f == SWI_IO_NRRD) return check_nrrd_data(path, bytes, count, err, n);
        if (f == SWI_IO_METAIMAGE)
            return check_meta_data(static_cast<itk::MetaImageIO *>(io.GetPointer()), path, bytes, false, err,
                                   n);
        return SWI_OK;
    });
}

extern "C" swi_status io__itk_read(const swi_volume *v, float *dst, const swi_io_cancel *cancel, char *err,
                                   size_t n) {
    if (io__cancelled(cancel)) {
        io__err(err, n, "interrupted");
        return SWI_ERR_CANCELLED;
    }
    const char *path = v->path, *what = format_name(v->format);
    return guarded(path, what, err, n, [&]() -> swi_status {
        /* screened again: the file may have changed since it was opened */
        swi_status hs = v->format == SWI_IO_METAIMAGE ? check_meta_header(path, err, n)
                        : v->format == SWI_IO_NRRD    ? check_nrrd_header(path, err, n)
                                                      : SWI_OK;
        if (hs) return hs;
        itk::ImageIOBase::Pointer io = make_io(v->format);
        io->SetFileName(path);
        io->ReadImageInformation();
        swi_volume now;
        memset(&now, 0, sizeof now);
        swi_status st = take_info(io.GetPointer(), path, v->format, &now, err, n);
        if (st) return st;
        if (memcmp(now.size, v->size, sizeof now.size) != 0 ||
            now.fmt.itk.component != v->fmt.itk.component) {
            io__err(err, n, "%s: the file changed since it was opened", path);
            return SWI_ERR_INVALID_ARG;
        }
        std::unique_ptr<unsigned char[]> buf;
        const int64_t count = swi_volume_voxels(v);
        const uint64_t bytes = (uint64_t)count * (uint64_t)v->bytes_per_voxel;
        if (v->format == SWI_IO_METAIMAGE &&
            (st = check_meta_data(static_cast<itk::MetaImageIO *>(io.GetPointer()), path, bytes, true, err,
                                  n)))
            return st;
        if (v->format == SWI_IO_NRRD && (st = check_nrrd_data(path, bytes, (uint64_t)count, err, n)))
            return st;
        if ((st = read_all(io.GetPointer(), path, count, v->bytes_per_voxel, buf, err, n))) return st;
        convert((Comp)v->fmt.itk.component, buf.get(), v->size, count, dst);
        return SWI_OK;
    });
}

extern "C" swi_status io__itk_dicom_slice(const char *file, io_slice *s, char *err, size_t n) {
    return guarded(file, "DICOM", err, n, [&]() -> swi_status {
        itk::GDCMImageIO::Pointer io = itk::GDCMImageIO::New();
        if (!io->CanReadFile(file)) {
            io__err(err, n, "%s: not a readable DICOM image", file);
            return SWI_ERR_INVALID_ARG;
        }
        io->SetFileName(file);
        io->ReadImageInformation();
        swi_volume v;
        memset(&v, 0, sizeof v);
        swi_status st = take_info(io.GetPointer(), file, SWI_IO_DICOM, &v, err, n);
        if (st) return st;
        std::string uid;
        io->GetValueFromTag("0020|000e", uid);
        while (!uid.empty() && (uid.back() == ' ' || uid.back() == '\0')) uid.pop_back();
        snprintf(s->series_uid, sizeof s->series_uid, "%s", uid.c_str());
        s->cols = v.size[0];
        s->rows = v.size[1];
        s->frames = v.size[2];
        s->components = (int64_t)io->GetComponentType();
        for (int r = 0; r < 3; r++) {
            /* back to LPS: take_info made the affine RAS */
            double flip = r < 2 ? -1.0 : 1.0;
            s->origin[r] = flip * v.affine[r][3];
            s->row_dir[r] = flip * v.affine[r][0] / v.spacing[0];
            s->col_dir[r] = flip * v.affine[r][1] / v.spacing[1];
        }
        s->spacing[0] = v.spacing[0];
        s->spacing[1] = v.spacing[1];
        return SWI_OK;
    });
}

extern "C" void io__itk_hold(int hold) {
    if (hold)
        g_itk_mu.lock();
    else
        g_itk_mu.unlock();
}

namespace {

/* GDCM pads short pixel data with zeros, saying so only in a warning: while a slice is
 * read, its warnings are collected (GDCM's trace streams are global, hence the lock). */
std::mutex g_gdcm_mu;

struct GdcmWarnings {
    std::ostringstream text;
    std::lock_guard<std::mutex> lock{g_gdcm_mu};
    GdcmWarnings() {
        gdcm::Trace::SetWarningStream(text);
        gdcm::Trace::SetWarning(true);
    }
    ~GdcmWarnings() {
        gdcm::Trace::SetWarning(false);
        gdcm::Trace::SetWarningStream(std::cerr);
    }
};

} // namespace

extern "C" swi_status io__itk_dicom_pixels(const io_slice *s, float *dst, char *err, size_t n) {
    return guarded(s->file, "DICOM", err, n, [&]() -> swi_status {
        GdcmWarnings warnings;
        itk::GDCMImageIO::Pointer io = itk::GDCMImageIO::New();
        io->SetFileName(s->file);
        io->ReadImageInformation();
        if ((int64_t)io->GetDimensions(0) != s->cols || (int64_t)io->GetDimensions(1) != s->rows ||
            io->GetNumberOfComponents() != 1) {
            io__err(err, n, "%s: the file changed since the series was opened", s->file);
            return SWI_ERR_INVALID_ARG;
        }
        Comp c = io->GetComponentType();
        int nb = comp_bytes(c);
        if (nb == 0) {
            io__err(err, n, "%s: unsupported voxel type %s", s->file,
                    itk::ImageIOBase::GetComponentTypeAsString(c).c_str());
            return SWI_ERR_INVALID_ARG;
        }
        std::unique_ptr<unsigned char[]> buf;
        swi_status st = read_all(io.GetPointer(), s->file, s->cols * s->rows, nb, buf, err, n);
        if (st) return st;
        if (warnings.text.str().find("Incomplete Pixel Data") != std::string::npos) {
            io__err(err, n, "%s: truncated: the pixel data end before the image does", s->file);
            return SWI_ERR_INVALID_ARG;
        }
        convert(c, buf.get(), NULL, s->cols * s->rows, dst);
        return SWI_OK;
    });
}

namespace {

/* dst [planes][ni][nj][nk] of dtype -> ITK order (i fastest), one plane after another. */
template <typename T> void transpose_out(const void *src, const int64_t size[3], int64_t planes, T *dst) {
    const T *s = static_cast<const T *>(src);
    const int64_t ni = size[0], nj = size[1], nk = size[2], vol = ni * nj * nk;
    for (int64_t c = 0; c < planes; c++) {
        const T *sp = s + c * vol;
        T *dp = dst + c * vol;
        for (int64_t i = 0; i < ni; i++)
            for (int64_t j = 0; j < nj; j++) {
                const T *p = sp + (i * nj + j) * nk;
                T *q = dp + i + ni * j;
                for (int64_t k = 0; k < nk; k++) q[k * ni * nj] = p[k];
            }
    }
}

} // namespace

extern "C" swi_status io__itk_write_fd(int fd, const char *name, swi_io_format f, const swi_volume *like,
                                       const void *data, swi_dtype dtype, int64_t planes,
                                       const swi_io_cancel *cancel, char *err, size_t n) {
    const int64_t *size = like->size;
    const char *bad = NULL;
    if (fd < 0)
        bad = "fd < 0";
    else if (dtype != SWI_DTYPE_UINT8 && dtype != SWI_DTYPE_UINT16 && dtype != SWI_DTYPE_FLOAT32)
        bad = "dtype must be SWI_DTYPE_UINT8, _UINT16 or _FLOAT32";
    else if (planes < 1 || planes > ((int64_t)1 << 31))
        bad = "planes must be 1..2^31";
    else if (size[0] < 1 || size[1] < 1 || size[2] < 1 || size[0] > IO_MAX_VOXELS / size[1] ||
             size[0] * size[1] > IO_MAX_VOXELS / size[2] ||
             size[0] * size[1] * size[2] > IO_MAX_VOXELS / planes)
        bad = "like's sizes are not a volume";
    if (bad) {
        if (fd >= 0) close(fd);
        io__err(err, n, "%s: %s", name, bad);
        return SWI_ERR_INVALID_ARG;
    }
    /* LPS geometry from the affine: columns are spacing x direction. */
    double sp[3], dir[3][3], org[3];
    for (int k = 0; k < 3; k++) {
        double m[3], s2 = 0;
        for (int r = 0; r < 3; r++) {
            m[r] = (r < 2 ? -1.0 : 1.0) * like->affine[r][k];
            s2 += m[r] * m[r];
        }
        sp[k] = std::sqrt(s2);
        if (!(sp[k] > 0) || !std::isfinite(sp[k])) {
            close(fd);
            io__err(err, n, "%s: like's affine has a zero or non-finite column %d", name, k);
            return SWI_ERR_INVALID_ARG;
        }
        for (int r = 0; r < 3; r++) dir[r][k] = m[r] / sp[k];
        org[k] = (k < 2 ? -1.0 : 1.0) * like->affine[k][3];
    }
    if (io__cancelled(cancel)) {
        close(fd);
        io__err(err, n, "interrupted");
        return SWI_ERR_CANCELLED;
    }
    /* ITK writes to a name whose suffix it reads: a private directory, then copied into fd. */
    const char *tdir = getenv("TMPDIR");
    std::string dirt = std::string(tdir && *tdir ? tdir : "/tmp") + "/swi-itk-XXXXXX";
    std::vector<char> dirbuf(dirt.begin(), dirt.end());
    dirbuf.push_back('\0');
    if (!mkdtemp(dirbuf.data())) {
        int e = errno;
        close(fd);
        io__err(err, n, "%s: cannot make a temporary directory in %s: %s", name,
                tdir && *tdir ? tdir : "/tmp", strerror(e));
        return SWI_ERR_INVALID_ARG;
    }
    std::string tmp = std::string(dirbuf.data()) + (f == SWI_IO_NRRD ? "/out.nrrd" : "/out.mha");
    const int64_t vol = size[0] * size[1] * size[2];
    swi_status st = guarded(name, format_name(f), err, n, [&]() -> swi_status {
        itk::ImageIOBase::Pointer io = make_io(f);
        unsigned nd = planes > 1 ? 4 : 3;
        io->SetNumberOfDimensions(nd);
        for (unsigned a = 0; a < nd; a++) {
            std::vector<double> d(nd, 0.0);
            if (a < 3) {
                io->SetDimensions(a, (itk::SizeValueType)size[a]);
                io->SetSpacing(a, sp[a]);
                io->SetOrigin(a, org[a]);
                for (int r = 0; r < 3; r++) d[r] = dir[r][a];
            } else {
                io->SetDimensions(a, (itk::SizeValueType)planes);
                io->SetSpacing(a, 1.0);
                io->SetOrigin(a, 0.0);
                d[a] = 1.0;
            }
            io->SetDirection(a, d);
        }
        io->SetPixelType(itk::IOPixelEnum::SCALAR);
        io->SetNumberOfComponents(1);
        size_t nb = dtype == SWI_DTYPE_UINT8 ? 1 : dtype == SWI_DTYPE_UINT16 ? 2 : 4;
        io->SetComponentType(nb == 1 ? Comp::UCHAR : nb == 2 ? Comp::USHORT : Comp::FLOAT);
        io->SetUseCompression(true);
        io->SetFileName(tmp.c_str());
        itk::ImageIORegion region(nd);
        for (unsigned a = 0; a < nd; a++) {
            region.SetIndex(a, 0);
            region.SetSize(a, io->GetDimensions(a));
        }
        io->SetIORegion(region);
        size_t bytes = (size_t)(vol * planes) * nb;
        std::unique_ptr<unsigned char[]> buf(new (std::nothrow) unsigned char[bytes]);
        if (!buf) {
            char b[32];
            io__err(err, n, "%s: out of memory (%s)", name, io__bytes(bytes, b));
            return SWI_ERR_NOMEM;
        }
        if (nb == 1)
            transpose_out(data, size, planes, buf.get());
        else if (nb == 2)
            transpose_out(data, size, planes, reinterpret_cast<uint16_t *>(buf.get()));
        else
            transpose_out(data, size, planes, reinterpret_cast<float *>(buf.get()));
        io->Write(buf.get());
        return SWI_OK;
    });
    if (st == SWI_OK) st = io__copy_into(tmp.c_str(), fd, name, err, n);
    unlink(tmp.c_str());
    rmdir(dirbuf.data());
    if (close(fd) != 0 && st == SWI_OK) {
        io__err(err, n, "%s: write failed: %s", name, strerror(errno));
        st = SWI_ERR_INVALID_ARG;
    }
    return st;
}
