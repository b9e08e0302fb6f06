/* itk_screen.cxx -- a NRRD header screened before teem parses it (its data file names, a
 * numbered series' pattern) and what it claims checked against its data before teem
 * allocates for it; and the header reading the MetaImage screens share. Built with ITK
 * (its teem, NrrdIO.h). */
#include "itk_screen.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sys/stat.h>
#include <unistd.h>

#include <NrrdIO.h> /* ITK's teem, its names prefixed itk_ */

/* MetaIO and teem format a numbered series' file name (slice%03d.raw 1 40 1) with sprintf,
 * the name as the format and an int as its one argument: any other conversion (%n, %s)
 * writes or reads through garbage (found by fuzz_itk_headers), and teem's buffer has room
 * for 10 characters more than the name (a width of 99 overflowed it). At most one
 * %[0-9]*d or %[0-9]*i of width at most 11 (an int's widest), and %% for a percent sign. */
bool io__itk_file_pattern_ok(const std::string &v) {
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
bool io__itk_read_head(const char *path, size_t max, std::string &head) {
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
std::string io__itk_next_line(const std::string &head, size_t &at) {
    size_t eol = head.find('\n', at);
    std::string line = head.substr(at, eol == std::string::npos ? std::string::npos : eol - at);
    at = eol == std::string::npos ? head.size() : eol + 1;
    return line;
}

/* A header value's words, split at blanks as MetaIO's MET_StringToWordArray does. */
std::vector<std::string> io__itk_split_words(const std::string &v) {
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

/* A data file a header names, relative to the header's folder: teem and MetaIO open it by
 * name, and a FIFO or device there would block them forever, so it must be a regular file. */
static swi_status check_data_file(const char *path, const std::string &name, const char *what, char *err,
                                  size_t n) {
    std::string file = name;
    size_t slash = std::string(path).rfind('/');
    if (!file.empty() && file[0] != '/' && slash != std::string::npos)
        file = std::string(path).substr(0, slash + 1) + file;
    char why[1024];
    if (file.empty() || swi_io_check_regular(file.c_str(), NULL, why, sizeof why) != SWI_OK) {
        io__err(err, n, "%s: %s: %s", path, what, file.empty() ? "no file named" : why);
        return file.empty() ? SWI_ERR_INVALID_ARG : SWI_ERR_IO;
    }
    return SWI_OK;
}

/* The files of a numbered series "FORMAT FIRST LAST STEP" (FORMAT screened by
 * io__itk_file_pattern_ok: one %d or %i, width at most 11), each checked by check_data_file. */
static swi_status check_data_series(const char *path, const std::vector<std::string> &w, const char *what,
                                    char *err, size_t n) {
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
 * io__itk_file_pattern_ok): its header lines, up to the blank line that ends them (at most 1 MB of
 * them), are screened for that field before teem parses them. */
swi_status io__itk_check_nrrd_header(const char *path, char *err, size_t n) {
    std::string head;
    const size_t max = 1 << 20;
    if (!io__itk_read_head(path, max, head)) {
        io__err(err, n, "%s: cannot open: %s", path, strerror(errno));
        return SWI_ERR_IO;
    }
    for (size_t at = 0;;) {
        if (at >= head.size()) {
            if (head.size() < max) break;
            io__err(err, n, "%s: corrupt NRRD header: no blank line ends it in its first 1 MB", path);
            return SWI_ERR_INVALID_ARG;
        }
        std::string line = io__itk_next_line(head, at);
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (line.empty()) break;
        size_t colon = line.find(':');
        if (colon == std::string::npos) continue;
        std::string key = line.substr(0, colon);
        if (key != "data file" && key != "datafile") continue;
        size_t b = line.find_first_not_of(" \t", colon + 1);
        std::string name = b == std::string::npos ? std::string() : line.substr(b);
        name = name.substr(0, name.find_first_of(" \t"));
        if (!io__itk_file_pattern_ok(name)) {
            io__err(err, n,
                    "%s: NRRD data file may hold one %%d of width at most 11 (a numbered file series) and no "
                    "other %% conversion",
                    path);
            return SWI_ERR_INVALID_ARG;
        }
        if (name == "LIST") {
            /* the lines after it are file names, to the end of the file */
            while (at < head.size()) {
                std::string file = io__itk_next_line(head, at);
                if (!file.empty() && file.back() == '\r') file.pop_back();
                if (file.empty()) continue;
                if (swi_status st = check_data_file(path, file, "data file LIST", err, n)) return st;
            }
            break;
        }
        std::vector<std::string> words = io__itk_split_words(line.substr(colon + 1));
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
 * (io__itk_check_nrrd_header has screened it within its first 1 MB). */
static int64_t nrrd_header_bytes(const char *path) {
    std::string head;
    if (!io__itk_read_head(path, 1 << 20, head)) return -1;
    for (size_t at = 0; at < head.size();) {
        std::string line = io__itk_next_line(head, at);
        if (line.empty() || line == "\r") return (int64_t)at;
    }
    return (int64_t)head.size();
}

/* teem (under NrrdImageIO) allocates all the voxels a header claims before it reads them:
 * the claim is checked first against the data teem would read them from. Its own header
 * reader (skipData: no voxel is read or allocated) names the data files and encoding; raw
 * data must be all there, ascii and hex at their fewest characters per value, and gzip
 * data within deflate's largest expansion. */
swi_status io__itk_check_nrrd_data(const char *path, uint64_t bytes, uint64_t count, char *err, size_t n) {
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
            /* the format holds one %d at most (io__itk_check_nrrd_header) */
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
            path, swi_format_bytes((size_t)bytes, b, sizeof b), (unsigned long long)have,
            IO_DEFLATE_MAX_RATIO);
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
