/* nifti_read.c -- NIfTI-1/-2 in: header validation, geometry, voxels through niftilib. */
#include "io_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef SWI_HAVE_NIFTI

int io__nifti_available(void) { return 0; }

static swi_status no_nifti(char *err, size_t n, const char *path) {
    io__err(err, n,
            "%s: swi_io was built without NIfTI support (install libnifti2-dev and "
            "rebuild)",
            path ? path : "NIfTI");
    return SWI_ERR_INVALID_ARG;
}

swi_status io__nifti_open(const char *path, swi_volume *v, char *err, size_t n) {
    memset(v, 0, sizeof *v);
    return no_nifti(err, n, path);
}

swi_status io__nifti_read(const swi_volume *v, float *dst, int64_t frames, const swi_io_cancel *cancel,
                          int64_t *nonfinite, char *err, size_t n) {
    (void)dst, (void)cancel, (void)frames;
    if (nonfinite) *nonfinite = 0;
    return no_nifti(err, n, v->path);
}

swi_status io__nifti_make(swi_volume *v, const int64_t size[3], const double spacing[3], char *err,
                          size_t n) {
    memset(v, 0, sizeof *v);
    (void)size, (void)spacing;
    return no_nifti(err, n, NULL);
}

#else /* SWI_HAVE_NIFTI */

#include <nifti2_io.h>
#include <zlib.h>

#include "io_gzip.h"

int io__nifti_available(void) { return 1; }

static void quiet_once(void) {
    nifti_set_debug_level(0); /* we report errors ourselves, in one line */
    nifti_set_allow_upper_fext(1);
}

static void quiet_niftilib(void) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, quiet_once);
}

/* Name and size of a scalar datatype; 0 for types swi does not read. */
static int scalar_size(int dt) {
    switch (dt) {
    case NIFTI_TYPE_UINT8:
    case NIFTI_TYPE_INT8: return 1;
    case NIFTI_TYPE_INT16:
    case NIFTI_TYPE_UINT16: return 2;
    case NIFTI_TYPE_INT32:
    case NIFTI_TYPE_UINT32:
    case NIFTI_TYPE_FLOAT32: return 4;
    case NIFTI_TYPE_INT64:
    case NIFTI_TYPE_UINT64:
    case NIFTI_TYPE_FLOAT64: return 8;
    case NIFTI_TYPE_FLOAT128: return sizeof(long double) == 16 ? 16 : 0;
    default: return 0;
    }
}

static int is_known_type(int dt) {
    switch (dt) {
    case DT_BINARY:
    case NIFTI_TYPE_UINT8:
    case NIFTI_TYPE_INT16:
    case NIFTI_TYPE_INT32:
    case NIFTI_TYPE_FLOAT32:
    case NIFTI_TYPE_COMPLEX64:
    case NIFTI_TYPE_FLOAT64:
    case NIFTI_TYPE_RGB24:
    case NIFTI_TYPE_INT8:
    case NIFTI_TYPE_UINT16:
    case NIFTI_TYPE_UINT32:
    case NIFTI_TYPE_INT64:
    case NIFTI_TYPE_UINT64:
    case NIFTI_TYPE_FLOAT128:
    case NIFTI_TYPE_COMPLEX128:
    case NIFTI_TYPE_COMPLEX256:
    case NIFTI_TYPE_RGBA32: return 1;
    default: return 0;
    }
}

static uint32_t bswap32(uint32_t x) {
    return (x >> 24) | ((x >> 8) & 0xff00u) | ((x << 8) & 0xff0000u) | (x << 24);
}

static swi_io_type io_type_of(int dt) {
    switch (dt) {
    case NIFTI_TYPE_UINT8: return SWI_IO_TYPE_UINT8;
    case NIFTI_TYPE_INT8: return SWI_IO_TYPE_INT8;
    case NIFTI_TYPE_UINT16: return SWI_IO_TYPE_UINT16;
    case NIFTI_TYPE_INT16: return SWI_IO_TYPE_INT16;
    case NIFTI_TYPE_UINT32: return SWI_IO_TYPE_UINT32;
    case NIFTI_TYPE_INT32: return SWI_IO_TYPE_INT32;
    case NIFTI_TYPE_UINT64: return SWI_IO_TYPE_UINT64;
    case NIFTI_TYPE_INT64: return SWI_IO_TYPE_INT64;
    case NIFTI_TYPE_FLOAT64: return SWI_IO_TYPE_FLOAT64;
    case NIFTI_TYPE_FLOAT128: return SWI_IO_TYPE_FLOAT128;
    default: return SWI_IO_TYPE_FLOAT32;
    }
}

/* The header fields geometry is made of, from either version. */
typedef struct geom_fields {
    double pixdim[8];
    int qform_code, sform_code;
    double qb, qc, qd, qx, qy, qz;
    double srow[3][4];
} geom_fields;

/* The two versions name the fields alike but lay them out (and type them) differently. */
#define GEOM_FROM(h)                                                                                        \
    do {                                                                                                    \
        for (int i = 0; i < 8; i++) g->pixdim[i] = (h)->pixdim[i];                                          \
        g->qform_code = (h)->qform_code, g->sform_code = (h)->sform_code;                                   \
        g->qb = (h)->quatern_b, g->qc = (h)->quatern_c, g->qd = (h)->quatern_d;                             \
        g->qx = (h)->qoffset_x, g->qy = (h)->qoffset_y, g->qz = (h)->qoffset_z;                             \
        for (int c = 0; c < 4; c++)                                                                         \
            g->srow[0][c] = (h)->srow_x[c], g->srow[1][c] = (h)->srow_y[c], g->srow[2][c] = (h)->srow_z[c]; \
    } while (0)

static void geom_of(const swi_volume *v, geom_fields *g) {
    memset(g, 0, sizeof *g);
    if (v->fmt.nifti.version == 1)
        GEOM_FROM((const nifti_1_header *)v->fmt.nifti.hdr);
    else
        GEOM_FROM((const nifti_2_header *)v->fmt.nifti.hdr);
}
#undef GEOM_FROM

/* spacing and affine as nibabel derives them (get_best_affine): sform if its code is set,
 * else the qform (quaternion, pixdim, qfac), else pixdim with x flipped about the centre. */
static void set_geometry(swi_volume *v) {
    geom_fields g;
    geom_of(v, &g);
    double(*A)[4] = v->affine;
    memset(v->affine, 0, sizeof v->affine);
    A[3][3] = 1;
    for (int a = 0; a < 3; a++) v->spacing[a] = g.pixdim[a + 1];
    if (g.sform_code > 0) {
        for (int r = 0; r < 3; r++)
            for (int c = 0; c < 4; c++) A[r][c] = g.srow[r][c];
    } else if (g.qform_code > 0) {
        double b = g.qb, c = g.qc, d = g.qd;
        double a2 = 1.0 - (b * b + c * c + d * d), a = 0;
        if (a2 < 1e-7) { /* a 180-degree rotation: renormalise (b, c, d), a = 0 */
            double s = 1.0 / sqrt(b * b + c * c + d * d);
            b *= s, c *= s, d *= s;
        } else {
            a = sqrt(a2);
        }
        double qfac = g.pixdim[0] < 0 ? -1.0 : 1.0;
        double R[3][3] = {
            {a * a + b * b - c * c - d * d, 2 * (b * c - a * d), 2 * (b * d + a * c)},
            {2 * (b * c + a * d), a * a + c * c - b * b - d * d, 2 * (c * d - a * b)},
            {2 * (b * d - a * c), 2 * (c * d + a * b), a * a + d * d - c * c - b * b},
        };
        double z[3] = {g.pixdim[1], g.pixdim[2], qfac * g.pixdim[3]};
        for (int r = 0; r < 3; r++)
            for (int k = 0; k < 3; k++) A[r][k] = R[r][k] * z[k];
        A[0][3] = g.qx, A[1][3] = g.qy, A[2][3] = g.qz;
    } else {
        for (int k = 0; k < 3; k++) {
            double z = k == 0 ? -g.pixdim[1] : g.pixdim[k + 1];
            A[k][k] = z;
            A[k][3] = -((double)v->size[k] - 1) / 2.0 * z;
        }
    }
}

swi_status io__nifti_open(const char *path, swi_volume *v, char *err, size_t n) {
    quiet_niftilib();
    memset(v, 0, sizeof *v);
    if (strlen(path) >= sizeof v->path) {
        io__err(err, n, "%.200s...: path too long", path);
        return SWI_ERR_INVALID_ARG;
    }
    strcpy(v->path, path);

    struct stat st;
    if (stat(path, &st) != 0) {
        io__err(err, n, "%s: cannot open: %s", path, strerror(errno));
        return SWI_ERR_IO;
    }
    if (S_ISDIR(st.st_mode)) {
        io__err(err, n, "%s: is a directory, not a NIfTI file", path);
        return SWI_ERR_IO;
    }
    if (swi_io_format_of(path) != SWI_IO_NIFTI) {
        io__err(err, n, "%s: not a NIfTI file name (expected .nii or .nii.gz)", path);
        return SWI_ERR_INVALID_ARG;
    }
    /* never blocks on a FIFO or a device named like a volume */
    int fd = swi_io_open_regular(path, NULL, err, n);
    if (fd < 0) return SWI_ERR_IO;
    gzFile g = gzdopen(fd, "rb"); /* reads plain files too */
    if (!g) {
        close(fd);
        io__err(err, n, "%s: cannot open: out of memory", path);
        return SWI_ERR_NOMEM;
    }
    unsigned char raw[sizeof v->fmt.nifti.hdr];
    memset(raw, 0, sizeof raw);
    int got = 0;
    while (got < (int)sizeof raw) {
        int r = gzread(g, raw + got, (unsigned)(sizeof raw - (size_t)got));
        if (r < 0) {
            int zerr = 0;
            const char *zmsg = gzerror(g, &zerr);
            io__err(err, n, "%s: corrupt compressed data (%s)", path, zmsg ? zmsg : "gzip error");
            gzclose(g);
            return zerr == Z_ERRNO ? SWI_ERR_IO : zerr == Z_MEM_ERROR ? SWI_ERR_NOMEM : SWI_ERR_INVALID_ARG;
        }
        if (r == 0) break;
        got += r;
    }
    int is_gz = gzdirect(g) == 0;
    gzclose(g);

    if (got < (int)sizeof(nifti_1_header)) {
        io__err(err, n, "%s: not a NIfTI file (%s%d bytes; a header alone has 348)", path,
                is_gz ? "decompresses to " : "", got);
        return SWI_ERR_INVALID_ARG;
    }
    uint32_t sh;
    memcpy(&sh, raw, 4);
    int swap = 0, version;
    if (sh == 348 || bswap32(sh) == 348) {
        version = 1;
        swap = sh != 348;
    } else if (sh == 540 || bswap32(sh) == 540) {
        version = 2;
        swap = sh != 540;
    } else {
        io__err(err, n, "%s: not a NIfTI file (header size field is %u; NIfTI-1 has 348, NIfTI-2 540)", path,
                (unsigned)sh);
        return SWI_ERR_INVALID_ARG;
    }
    if (version == 2 && got < (int)sizeof(nifti_2_header)) {
        io__err(err, n, "%s: truncated NIfTI-2 header (%d of 540 bytes)", path, got);
        return SWI_ERR_INVALID_ARG;
    }
    v->fmt.nifti.version = version;
    memcpy(v->fmt.nifti.hdr, raw, version == 1 ? sizeof(nifti_1_header) : sizeof(nifti_2_header));
    memcpy(v->fmt.nifti.raw, raw, sizeof v->fmt.nifti.raw);

    const char *magic;
    int64_t dim[8];
    double slope, inter, vox_offset;
    int datatype;
    if (version == 1) {
        nifti_1_header *h = (nifti_1_header *)v->fmt.nifti.hdr;
        if (swap) swap_nifti_header(h, 1);
        magic = h->magic;
        for (int i = 0; i < 8; i++) dim[i] = h->dim[i];
        slope = h->scl_slope;
        inter = h->scl_inter;
        vox_offset = h->vox_offset;
        datatype = h->datatype;
    } else {
        nifti_2_header *h = (nifti_2_header *)v->fmt.nifti.hdr;
        if (swap) swap_nifti_header(h, 2);
        magic = h->magic;
        for (int i = 0; i < 8; i++) dim[i] = h->dim[i];
        slope = h->scl_slope;
        inter = h->scl_inter;
        vox_offset = (double)h->vox_offset;
        datatype = h->datatype;
    }

    /* Magic: single-file NIfTI only. */
    if (magic[0] != 'n' || magic[3] != '\0' || magic[2] != (char)('0' + version) ||
        (magic[1] != '+' && magic[1] != 'i')) {
        io__err(err, n, "%s: not a NIfTI-%d file (no NIfTI magic; an Analyze 7.5 header?)", path, version);
        return SWI_ERR_INVALID_ARG;
    }
    if (magic[1] == 'i') {
        io__err(err, n, "%s: two-file NIfTI (.hdr/.img) is not supported; convert it to .nii", path);
        return SWI_ERR_INVALID_ARG;
    }

    /* Dimensions. */
    if (dim[0] < 1 || dim[0] > 7) {
        io__err(err, n, "%s: corrupt header: dim[0] = %lld (must be 1..7)", path, (long long)dim[0]);
        return SWI_ERR_INVALID_ARG;
    }
    for (int i = 1; i <= dim[0]; i++) {
        if (dim[i] < 1) {
            io__err(err, n, "%s: corrupt header: dim[%d] = %lld (sizes must be >= 1)", path, i,
                    (long long)dim[i]);
            return SWI_ERR_INVALID_ARG;
        }
    }
    int nd = (int)dim[0];
    while (nd > 3 && dim[nd] == 1) nd--;
    /* a 4th axis holds channels (the Decathlon's multi-modal images) */
    int64_t frames = nd == 4 ? dim[4] : 1;
    if (nd != 3 && nd != 4) {
        char shape[160] = "";
        size_t len = 0;
        for (int i = 1; i <= dim[0] && len < sizeof shape - 24; i++)
            len += (size_t)snprintf(shape + len, sizeof shape - len, "%s%lld", i > 1 ? "x" : "",
                                    (long long)dim[i]);
        io__err(err, n, "%s: is a %d-D image (%s); swi segments 3-D volumes (4th dim 1 is fine)", path, nd,
                shape);
        return SWI_ERR_INVALID_ARG;
    }
    int64_t nvox = 1;
    for (int i = 1; i <= 3; i++) {
        if (dim[i] > IO_MAX_VOXELS / nvox) {
            io__err(err, n,
                    "%s: header sizes overflow: %lld x %lld x %lld voxels is more than swi "
                    "accepts (2^40)",
                    path, (long long)dim[1], (long long)dim[2], (long long)dim[3]);
            return SWI_ERR_INVALID_ARG;
        }
        nvox *= dim[i];
    }
    if (frames > IO_MAX_VOXELS / nvox) {
        io__err(err, n,
                "%s: header sizes overflow: %lld x %lld x %lld x %lld voxels is more "
                "than swi accepts (2^40)",
                path, (long long)dim[1], (long long)dim[2], (long long)dim[3], (long long)frames);
        return SWI_ERR_INVALID_ARG;
    }

    /* Datatype. */
    int nbyper = scalar_size(datatype);
    if (nbyper == 0) {
        if (is_known_type(datatype))
            io__err(err, n,
                    "%s: unsupported datatype %s (code %d); swi reads scalar voxels "
                    "(integers and floats)",
                    path, nifti_datatype_string(datatype), datatype);
        else
            io__err(err, n, "%s: corrupt header: unknown datatype code %d", path, datatype);
        return SWI_ERR_INVALID_ARG;
    }

    /* Data offset. */
    int64_t hsize = version == 1 ? 348 : 540;
    if (!isfinite(vox_offset) || vox_offset < 0 || vox_offset > (double)INT32_MAX ||
        vox_offset != floor(vox_offset)) {
        io__err(err, n, "%s: corrupt header: vox_offset = %g", path, vox_offset);
        return SWI_ERR_INVALID_ARG;
    }
    int64_t offset = (int64_t)vox_offset;
    if (offset < hsize) offset = hsize; /* as niftilib does */
    int64_t bytes = nvox * frames * nbyper;
    if (!is_gz) {
        int64_t need = offset + bytes;
        if ((int64_t)st.st_size < need) {
            io__err(err, n,
                    "%s: truncated: the header describes %lld x %lld x %lld voxels "
                    "(%lld bytes from offset %lld) but the file has %lld bytes",
                    path, (long long)dim[1], (long long)dim[2], (long long)dim[3], (long long)bytes,
                    (long long)offset, (long long)st.st_size);
            return SWI_ERR_INVALID_ARG;
        }
    } else if ((uint64_t)(offset + bytes) / IO_DEFLATE_MAX_RATIO >= (uint64_t)st.st_size) {
        /* refused before anything is allocated for voxels its bytes cannot hold */
        char b[32];
        io__err(
            err, n,
            "%s: the header describes %lld x %lld x %lld voxels (%s) but the file's %lld compressed bytes "
            "inflate to at most %lld (deflate inflates at most %d:1)",
            path, (long long)dim[1], (long long)dim[2], (long long)dim[3],
            swi_format_bytes((size_t)bytes, b, sizeof b), (long long)st.st_size,
            (long long)st.st_size * IO_DEFLATE_MAX_RATIO, IO_DEFLATE_MAX_RATIO);
        return SWI_ERR_INVALID_ARG;
    }

    /* Scaling: slope 0 or not finite means none (NIfTI and nibabel). */
    if (!isfinite(slope) || slope == 0) {
        slope = 1;
        inter = 0;
    } else if (!isfinite(inter)) {
        inter = 0;
    }

    v->format = SWI_IO_NIFTI;
    v->size[0] = dim[1];
    v->size[1] = dim[2];
    v->size[2] = dim[3];
    v->frames = frames;
    v->fmt.nifti.datatype = datatype;
    v->bytes_per_voxel = nbyper;
    v->slope = slope;
    v->inter = inter;
    v->fmt.nifti.offset = offset;
    v->type = io_type_of(datatype);
    set_geometry(v);
    return SWI_OK;
}

/* Convert + transpose: src is [nk][nj][ni] (file order), dst [ni][nj][nk]. Blocked along k so
 * both sides stream through cache lines. */
#define KB 16
#define CONVERT(T, EXPR_OF_X)                                \
    do {                                                     \
        const T *s = (const T *)src;                         \
        for (int64_t k0 = 0; k0 < nk; k0 += KB) {            \
            int64_t kn = nk - k0 < KB ? nk - k0 : KB;        \
            for (int64_t j = 0; j < nj; j++)                 \
                for (int64_t i = 0; i < ni; i++) {           \
                    float *d = dst + (i * nj + j) * nk + k0; \
                    const T *p = s + i + ni * (j + nj * k0); \
                    for (int64_t kk = 0; kk < kn; kk++) {    \
                        double x = (double)p[kk * plane];    \
                        d[kk] = (float)(EXPR_OF_X);          \
                    }                                        \
                }                                            \
        }                                                    \
    } while (0)

static void convert(const void *src, int datatype, const int64_t size[3], double slope, double inter,
                    float *dst) {
    const int64_t ni = size[0], nj = size[1], nk = size[2], plane = ni * nj;
    int scaled = !(slope == 1 && inter == 0);
    switch (datatype) {
    case NIFTI_TYPE_UINT8: CONVERT(uint8_t, x * slope + inter); break;
    case NIFTI_TYPE_INT8: CONVERT(int8_t, x * slope + inter); break;
    case NIFTI_TYPE_INT16: CONVERT(int16_t, x * slope + inter); break;
    case NIFTI_TYPE_UINT16: CONVERT(uint16_t, x * slope + inter); break;
    case NIFTI_TYPE_INT32: CONVERT(int32_t, x * slope + inter); break;
    case NIFTI_TYPE_UINT32: CONVERT(uint32_t, x * slope + inter); break;
    case NIFTI_TYPE_INT64: CONVERT(int64_t, x * slope + inter); break;
    case NIFTI_TYPE_UINT64: CONVERT(uint64_t, x * slope + inter); break;
    case NIFTI_TYPE_FLOAT32:
        if (scaled)
            CONVERT(float, x *slope + inter);
        else
            CONVERT(float, x);
        break;
    case NIFTI_TYPE_FLOAT64: CONVERT(double, scaled ? x *slope + inter : x); break;
    case NIFTI_TYPE_FLOAT128: {
        /* long double does not fit the double-based macro without losing range first;
         * convert it the same way through long double. */
        const long double *s = (const long double *)src;
        for (int64_t k = 0; k < nk; k++)
            for (int64_t j = 0; j < nj; j++)
                for (int64_t i = 0; i < ni; i++) {
                    long double x = s[i + ni * (j + nj * k)];
                    if (scaled) x = x * (long double)slope + (long double)inter;
                    dst[(i * nj + j) * nk + k] = (float)x;
                }
        break;
    }
    default: break;
    }
}

/* The voxels of a gzip file through libdeflate: header and voxels decompressed into one
 * malloc'd buffer, *buf (ntot bytes of voxels at its start). 0; -1 for corrupt data; -2 out
 * of memory; -3 cancelled; 1 when zlib must do it (*buf untouched). */
static int fast_gz_read(const swi_volume *v, const nifti_image *nim, void **buf, int64_t ntot,
                        const swi_io_cancel *cancel) {
    const int64_t off = v->fmt.nifti.offset;
    if (!io__gz_fast() || off < 0 || off > ((int64_t)1 << 24) || !io__gz_is_gzip(v->path)) return 1;
    unsigned char *all = io__malloc((size_t)(off + ntot));
    if (!all) return -2; /* out of memory: as the zlib path would be */
    int rc = io__gz_read(v->path, all, (size_t)(off + ntot), cancel);
    if (rc != 0) {
        free(all);
        return rc == IO_GZ_CORRUPT ? -1 : rc == IO_GZ_CANCELLED ? -3 : 1;
    }
    memmove(all, all + off, (size_t)ntot);                          /* aligned for the conversion */
    if (nim->swapsize > 1 && nim->byteorder != nifti_short_order()) /* as the zlib path */
        nifti_swap_Nbytes(ntot / nim->swapsize, nim->swapsize, all);
    *buf = all;
    return 0;
}

/* Voxels that are not finite numbers after conversion (NaN or +-Inf as stored, or made so
 * by scaling or by the conversion to float32) become 0; returns how many there were. */
static int64_t zero_nonfinite(float *x, int64_t count) {
    int64_t bad = 0;
    for (int64_t i = 0; i < count; i++)
        if (!isfinite(x[i])) {
            x[i] = 0;
            bad++;
        }
    return bad;
}

swi_status io__nifti_read(const swi_volume *v, float *dst, int64_t frames, const swi_io_cancel *cancel,
                          int64_t *nonfinite, char *err, size_t n) {
    if (nonfinite) *nonfinite = 0;
    quiet_niftilib();
    /* The image structure comes from the header we validated, not from nifti_image_read():
     * niftilib finds files by their base name, and asked for X.nii.gz it would read the
     * voxels of a sibling X.nii. The conversion also settles byte order and swapping. */
    nifti_image *nim;
    if (v->fmt.nifti.version == 1) {
        nifti_1_header h;
        memcpy(&h, v->fmt.nifti.raw, sizeof h);
        nim = nifti_convert_n1hdr2nim(h, v->path);
    } else {
        nifti_2_header h;
        memcpy(&h, v->fmt.nifti.raw, sizeof h);
        nim = nifti_convert_n2hdr2nim(h, v->path);
    }
    if (!nim) {
        io__err(err, n, "%s: niftilib could not use the header", v->path);
        return SWI_ERR_INVALID_ARG;
    }
    /* niftilib must see what we validated. */
    if (nim->nx != v->size[0] || nim->ny != v->size[1] || nim->nz != v->size[2] ||
        nim->nvox != v->size[0] * v->size[1] * v->size[2] * (v->frames > 1 ? v->frames : 1) ||
        nim->datatype != v->fmt.nifti.datatype || nim->nbyper != v->bytes_per_voxel ||
        nim->iname_offset != v->fmt.nifti.offset) {
        io__err(err, n, "%s: inconsistent header (niftilib reads %lldx%lldx%lld of type %d)", v->path,
                (long long)nim->nx, (long long)nim->ny, (long long)nim->nz, nim->datatype);
        nifti_image_free(nim);
        return SWI_ERR_INVALID_ARG;
    }
    if (io__cancelled(cancel)) {
        nifti_image_free(nim);
        io__err(err, n, "interrupted");
        return SWI_ERR_CANCELLED;
    }
    /* the frames asked for: a prefix of the data (frames follow one another in the file) */
    const int64_t nvox3 = v->size[0] * v->size[1] * v->size[2];
    if (frames < 1 || frames > (v->frames > 1 ? v->frames : 1)) {
        io__err(err, n, "%s: %lld frames asked, the file has %lld", v->path, (long long)frames,
                (long long)v->frames);
        nifti_image_free(nim);
        return SWI_ERR_INVALID_ARG;
    }
    const int64_t ntot = nvox3 * frames * nim->nbyper;
    int64_t got = -1;
    int io_failed = 0; /* the system failed to read (not a file shorter than its header says) */
    void *buf = NULL;
    /* gzip data through libdeflate (io/gzip.c) when it can, else exactly this file through
     * zlib, decompressed when it is gzip data whatever its name says (zlib reads plain files
     * through the same path). */
    int fast = fast_gz_read(v, nim, &buf, ntot, cancel);
    if (fast == -3) {
        io__err(err, n, "interrupted");
        nifti_image_free(nim);
        return SWI_ERR_CANCELLED;
    }
    if (fast == -2) {
        char b[32];
        io__err(err, n, "%s: out of memory reading %s of voxels", v->path,
                swi_format_bytes((size_t)ntot, b, sizeof b));
        nifti_image_free(nim);
        return SWI_ERR_NOMEM;
    }
    if (fast == 0) {
        got = ntot;
    } else if (fast > 0) {
        buf = io__malloc((size_t)ntot);
        if (!buf) {
            char b[32];
            io__err(err, n, "%s: out of memory reading %s of voxels", v->path,
                    swi_format_bytes((size_t)ntot, b, sizeof b));
            nifti_image_free(nim);
            return SWI_ERR_NOMEM;
        }
        /* Read and swap here rather than with nifti_read_buffer(), which zeroes NaN/Inf
         * floats without saying how many: they are counted below. In pieces, so that a
         * signal stops a long read; opened without blocking on a FIFO put in its place. */
        int fd = swi_io_open_regular(v->path, NULL, NULL, 0);
        gzFile g = fd >= 0 ? gzdopen(fd, "rb") : NULL;
        if (!g && fd >= 0) close(fd);
        int stopped = 0;
        io_failed = !g; /* the file went away, or zlib's state could not be allocated */
        if (g && gzseek(g, (z_off_t)v->fmt.nifti.offset, SEEK_SET) == (z_off_t)v->fmt.nifti.offset) {
            got = 0;
            while (got < ntot) {
                if (io__cancelled(cancel)) {
                    stopped = 1;
                    break;
                }
                const int64_t piece = ntot - got < ((int64_t)1 << 26) ? ntot - got : (int64_t)1 << 26;
                int r = gzread(g, (char *)buf + got, (unsigned)piece);
                if (r < 0) {
                    int zerr = 0;
                    gzerror(g, &zerr);
                    io_failed = zerr == Z_ERRNO;
                }
                if (r <= 0) break;
                got += r;
            }
        }
        if (g) gzclose(g);
        if (stopped) {
            io__err(err, n, "interrupted");
            free(buf);
            nifti_image_free(nim);
            return SWI_ERR_CANCELLED;
        }
        if (got == ntot && nim->swapsize > 1 && nim->byteorder != nifti_short_order())
            nifti_swap_Nbytes(ntot / nim->swapsize, nim->swapsize, buf);
    }
    if (got != ntot) {
        io__err(err, n,
                "%s: truncated or corrupt voxel data (could not read %lld bytes from "
                "offset %lld)",
                v->path, (long long)ntot, (long long)v->fmt.nifti.offset);
        free(buf);
        nifti_image_free(nim);
        return io_failed ? SWI_ERR_IO : SWI_ERR_INVALID_ARG;
    }
    for (int64_t f = 0; f < frames; f++)
        convert((const char *)buf + f * nvox3 * nim->nbyper, v->fmt.nifti.datatype, v->size, v->slope,
                v->inter, dst + f * nvox3);
    free(buf);
    /* Integers convert to finite floats unless scaled (uint64's largest is far below
     * FLT_MAX); floats and scaled values are checked. */
    const int dt = v->fmt.nifti.datatype;
    if (dt == NIFTI_TYPE_FLOAT32 || dt == NIFTI_TYPE_FLOAT64 || dt == NIFTI_TYPE_FLOAT128 ||
        !(v->slope == 1 && v->inter == 0)) {
        int64_t bad = zero_nonfinite(dst, nvox3 * frames);
        if (nonfinite) *nonfinite = bad;
    }
    nifti_image_free(nim);
    return SWI_OK;
}

swi_status io__nifti_make(swi_volume *v, const int64_t size[3], const double spacing[3], char *err,
                          size_t n) {
    memset(v, 0, sizeof *v);
    for (int a = 0; a < 3; a++) {
        if (size[a] < 1 || size[a] > 32767) {
            io__err(err, n, "size[%d] = %lld (a NIfTI-1 volume has 1..32767 voxels per axis)", a,
                    (long long)size[a]);
            return SWI_ERR_INVALID_ARG;
        }
        if (!(spacing[a] > 0) || !isfinite(spacing[a]) || spacing[a] > 3.4e38) {
            io__err(err, n, "spacing[%d] = %g (must be positive and finite)", a, spacing[a]);
            return SWI_ERR_INVALID_ARG;
        }
    }
    v->format = SWI_IO_NIFTI;
    v->type = SWI_IO_TYPE_FLOAT32;
    v->fmt.nifti.version = 1;
    nifti_1_header *h = (nifti_1_header *)v->fmt.nifti.hdr;
    h->sizeof_hdr = 348;
    h->dim[0] = 3;
    for (int i = 0; i < 3; i++) {
        h->dim[i + 1] = (short)size[i];
        h->pixdim[i + 1] = (float)spacing[i];
    }
    for (int i = 4; i < 8; i++) {
        h->dim[i] = 1;
        h->pixdim[i] = 1;
    }
    h->pixdim[0] = 1; /* qfac */
    h->datatype = NIFTI_TYPE_FLOAT32;
    h->bitpix = 32;
    h->vox_offset = 352;
    h->scl_slope = 1;
    h->xyzt_units = NIFTI_UNITS_MM | NIFTI_UNITS_SEC;
    h->qform_code = NIFTI_XFORM_SCANNER_ANAT;
    h->sform_code = NIFTI_XFORM_SCANNER_ANAT;
    h->srow_x[0] = (float)spacing[0];
    h->srow_y[1] = (float)spacing[1];
    h->srow_z[2] = (float)spacing[2];
    memcpy(h->magic, "n+1", 4);
    memcpy(v->size, size, sizeof v->size);
    v->frames = 1;
    v->fmt.nifti.datatype = NIFTI_TYPE_FLOAT32;
    v->bytes_per_voxel = 4;
    v->slope = 1;
    v->fmt.nifti.offset = 352;
    memcpy(v->fmt.nifti.raw, v->fmt.nifti.hdr, sizeof v->fmt.nifti.raw);
    set_geometry(v);
    return SWI_OK;
}

#endif /* SWI_HAVE_NIFTI */
