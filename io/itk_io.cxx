/* itk_io.cxx -- NRRD and MetaImage files, and single DICOM slices, through ITK's image I/O
 * classes used directly (no image templates, no factories: one light translation unit).
 * Every ITK call runs inside a try block; nothing is thrown across the C interface. A
 * NRRD's or MetaImage's header is screened first (itk_screen.cxx, itk_screen_meta.cxx).
 * Built only with ITK; itk_stub.c stands in without it. */
#include "itk_screen.h"

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

#include <gdcmTrace.h>

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

/* Read all of io's voxels (after ReadImageInformation) into a new buffer. */
swi_status read_all(itk::ImageIOBase *io, const char *path, int64_t count, int nb,
                    std::unique_ptr<unsigned char[]> &buf, char *err, size_t n) {
    size_t bytes = (size_t)count * (size_t)nb;
    buf.reset(new (std::nothrow) unsigned char[bytes]);
    if (!buf) {
        char b[32];
        io__err(err, n, "%s: out of memory reading %s of voxels", path, swi_format_bytes(bytes, b, sizeof b));
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
        return SWI_ERR_IO;
    }
    if (!S_ISREG(st.st_mode)) {
        io__err(err, n, "%s: not a regular file", path);
        return SWI_ERR_IO;
    }
    const char *what = format_name(f);
    return guarded(path, what, err, n, [&]() -> swi_status {
        swi_status hs = f == SWI_IO_METAIMAGE ? io__itk_check_meta_header(path, err, n)
                        : f == SWI_IO_NRRD    ? io__itk_check_nrrd_header(path, err, n)
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
        if (f == SWI_IO_NRRD) return io__itk_check_nrrd_data(path, bytes, count, err, n);
        if (f == SWI_IO_METAIMAGE)
            return io__itk_check_meta_data(static_cast<itk::MetaImageIO *>(io.GetPointer()), path, bytes,
                                           false, err, n);
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
        swi_status hs = v->format == SWI_IO_METAIMAGE ? io__itk_check_meta_header(path, err, n)
                        : v->format == SWI_IO_NRRD    ? io__itk_check_nrrd_header(path, err, n)
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
            (st = io__itk_check_meta_data(static_cast<itk::MetaImageIO *>(io.GetPointer()), path, bytes, true,
                                          err, n)))
            return st;
        if (v->format == SWI_IO_NRRD && (st = io__itk_check_nrrd_data(path, bytes, (uint64_t)count, err, n)))
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

extern "C" swi_status io__itk_write_fd(int fd, const char *name, swi_volume_format format,
                                       const swi_volume *like, const void *data, swi_dtype dtype,
                                       int64_t planes, const swi_io_cancel *cancel, char *err, size_t n) {
    const int64_t *size = like->size;
    const swi_io_format f = swi_volume_format_family(format);
    const char *bad = NULL;
    if (fd < 0)
        bad = "fd < 0";
    else if (format != SWI_VOLUME_NRRD && format != SWI_VOLUME_MHA)
        bad = "ITK writes .nrrd and .mha here";
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
    /* ITK picks the layout (data attached or not) by the suffix of the name it writes: the
     * format's own suffix in a private directory, then copied into fd. */
    const char *tdir = getenv("TMPDIR");
    std::string dirt = std::string(tdir && *tdir ? tdir : "/tmp") + "/swi-itk-XXXXXX";
    std::vector<char> dirbuf(dirt.begin(), dirt.end());
    dirbuf.push_back('\0');
    if (!mkdtemp(dirbuf.data())) {
        int e = errno;
        close(fd);
        io__err(err, n, "%s: cannot make a temporary directory in %s: %s", name,
                tdir && *tdir ? tdir : "/tmp", strerror(e));
        return SWI_ERR_IO;
    }
    std::string tmp = std::string(dirbuf.data()) + "/out" + swi_volume_format_suffix(format);
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
            io__err(err, n, "%s: out of memory (%s)", name, swi_format_bytes(bytes, b, sizeof b));
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
        st = SWI_ERR_IO;
    }
    return st;
}
