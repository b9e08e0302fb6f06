/* nifti_io.c -- see nifti_io.h. */
#include "nifti_io.h"

#include "safety.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef SWI_HAVE_NIFTI

int nifti_available(void) { return 0; }

static int no_nifti(char *err, const char *path)
{
    cli_err(err, "%s: swi was built without NIfTI support (install libnifti2-dev and rebuild)",
            path ? path : "NIfTI");
    return -1;
}

int nifti_vol_open(const char *path, nifti_vol *v, char *err)
{
    (void)v;
    return no_nifti(err, path);
}

int nifti_vol_load(const nifti_vol *v, float *dst, char *err)
{
    (void)dst;
    return no_nifti(err, v->path);
}

void nifti_vol_make(nifti_vol *v, const int64_t size[3], const double spacing[3])
{
    memset(v, 0, sizeof *v);
    memcpy(v->size, size, sizeof v->size);
    (void)spacing;
}

int nifti_write_fd(int fd, int gz, const char *name, const nifti_vol *like, const void *data,
                   nifti_out_type type, nifti_out_kind kind, int64_t planes, int64_t classes,
                   char *err)
{
    (void)gz, (void)like, (void)data, (void)type, (void)kind, (void)planes, (void)classes;
    close(fd);
    return no_nifti(err, name);
}

#else /* SWI_HAVE_NIFTI */

#include <nifti2_io.h>
#include <zlib.h>

int nifti_available(void) { return 1; }

/* Largest voxel count we accept: keeps every byte count (x 16 bytes per voxel, x channels)
 * far from overflowing int64_t/size_t. 2^40 voxels is 4 TB of float32. */
#define MAX_VOXELS ((int64_t)1 << 40)

static void quiet_niftilib(void)
{
    static int done;
    if (!done) {
        nifti_set_debug_level(0); /* we report errors ourselves, in one line */
        nifti_set_allow_upper_fext(1);
        done = 1;
    }
}

/* Name and size of a scalar datatype; 0 for types swi does not read. */
static int scalar_size(int dt)
{
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

static int is_known_type(int dt)
{
    switch (dt) {
    case DT_BINARY: case NIFTI_TYPE_UINT8: case NIFTI_TYPE_INT16: case NIFTI_TYPE_INT32:
    case NIFTI_TYPE_FLOAT32: case NIFTI_TYPE_COMPLEX64: case NIFTI_TYPE_FLOAT64:
    case NIFTI_TYPE_RGB24: case NIFTI_TYPE_INT8: case NIFTI_TYPE_UINT16: case NIFTI_TYPE_UINT32:
    case NIFTI_TYPE_INT64: case NIFTI_TYPE_UINT64: case NIFTI_TYPE_FLOAT128:
    case NIFTI_TYPE_COMPLEX128: case NIFTI_TYPE_COMPLEX256: case NIFTI_TYPE_RGBA32:
        return 1;
    default:
        return 0;
    }
}

static uint32_t bswap32(uint32_t x)
{
    return (x >> 24) | ((x >> 8) & 0xff00u) | ((x << 8) & 0xff0000u) | (x << 24);
}

static int has_suffix_nifti(const char *path)
{
    return cli_ends_with(path, ".nii") || cli_ends_with(path, ".nii.gz");
}

int nifti_vol_open(const char *path, nifti_vol *v, char *err)
{
    quiet_niftilib();
    memset(v, 0, sizeof *v);
    if (strlen(path) >= sizeof v->path) {
        cli_err(err, "%.200s...: path too long", path);
        return -1;
    }
    strcpy(v->path, path);

    struct stat st;
    if (stat(path, &st) != 0) {
        cli_err(err, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    if (S_ISDIR(st.st_mode)) {
        cli_err(err, "%s: is a directory, not a NIfTI file", path);
        return -1;
    }
    if (!has_suffix_nifti(path)) {
        cli_err(err, "%s: not a NIfTI file name (expected .nii or .nii.gz)", path);
        return -1;
    }
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        cli_err(err, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    gzFile g = gzdopen(fd, "rb"); /* reads plain files too */
    if (!g) {
        close(fd);
        cli_err(err, "%s: cannot open: out of memory", path);
        return -1;
    }
    unsigned char raw[sizeof v->hdr];
    memset(raw, 0, sizeof raw);
    int got = 0;
    while (got < (int)sizeof raw) {
        int r = gzread(g, raw + got, (unsigned)(sizeof raw - (size_t)got));
        if (r < 0) {
            int zerr = 0;
            const char *zmsg = gzerror(g, &zerr);
            cli_err(err, "%s: corrupt compressed data (%s)", path, zmsg ? zmsg : "gzip error");
            gzclose(g);
            return -1;
        }
        if (r == 0)
            break;
        got += r;
    }
    int is_gz = gzdirect(g) == 0;
    gzclose(g);

    if (got < (int)sizeof(nifti_1_header)) {
        cli_err(err, "%s: not a NIfTI file (%s%d bytes; a header alone has 348)", path,
                is_gz ? "decompresses to " : "", got);
        return -1;
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
        cli_err(err, "%s: not a NIfTI file (header size field is %u; NIfTI-1 has 348, NIfTI-2 540)",
                path, (unsigned)sh);
        return -1;
    }
    if (version == 2 && got < (int)sizeof(nifti_2_header)) {
        cli_err(err, "%s: truncated NIfTI-2 header (%d of 540 bytes)", path, got);
        return -1;
    }
    v->version = version;
    memcpy(v->hdr, raw, version == 1 ? sizeof(nifti_1_header) : sizeof(nifti_2_header));
    memcpy(v->raw, raw, sizeof v->raw);

    const char *magic;
    int64_t dim[8];
    double slope, inter, vox_offset;
    int datatype;
    if (version == 1) {
        nifti_1_header *h = (nifti_1_header *)v->hdr;
        if (swap)
            swap_nifti_header(h, 1);
        magic = h->magic;
        for (int i = 0; i < 8; i++)
            dim[i] = h->dim[i];
        slope = h->scl_slope;
        inter = h->scl_inter;
        vox_offset = h->vox_offset;
        datatype = h->datatype;
    } else {
        nifti_2_header *h = (nifti_2_header *)v->hdr;
        if (swap)
            swap_nifti_header(h, 2);
        magic = h->magic;
        for (int i = 0; i < 8; i++)
            dim[i] = h->dim[i];
        slope = h->scl_slope;
        inter = h->scl_inter;
        vox_offset = (double)h->vox_offset;
        datatype = h->datatype;
    }

    /* Magic: single-file NIfTI only. */
    if (magic[0] != 'n' || magic[3] != '\0' || magic[2] != (char)('0' + version) ||
        (magic[1] != '+' && magic[1] != 'i')) {
        cli_err(err, "%s: not a NIfTI-%d file (no NIfTI magic; an Analyze 7.5 header?)", path,
                version);
        return -1;
    }
    if (magic[1] == 'i') {
        cli_err(err, "%s: two-file NIfTI (.hdr/.img) is not supported; convert it to .nii", path);
        return -1;
    }

    /* Dimensions. */
    if (dim[0] < 1 || dim[0] > 7) {
        cli_err(err, "%s: corrupt header: dim[0] = %lld (must be 1..7)", path, (long long)dim[0]);
        return -1;
    }
    for (int i = 1; i <= dim[0]; i++) {
        if (dim[i] < 1) {
            cli_err(err, "%s: corrupt header: dim[%d] = %lld (sizes must be >= 1)", path, i,
                    (long long)dim[i]);
            return -1;
        }
    }
    int nd = (int)dim[0];
    while (nd > 3 && dim[nd] == 1)
        nd--;
    if (nd != 3) {
        char shape[160] = "";
        size_t len = 0;
        for (int i = 1; i <= dim[0] && len < sizeof shape - 24; i++)
            len += (size_t)snprintf(shape + len, sizeof shape - len, "%s%lld", i > 1 ? "x" : "",
                                    (long long)dim[i]);
        cli_err(err, "%s: is a %d-D image (%s); swi segments 3-D volumes (4th dim 1 is fine)",
                path, nd, shape);
        return -1;
    }
    int64_t nvox = 1;
    for (int i = 1; i <= 3; i++) {
        if (dim[i] > MAX_VOXELS / nvox) {
            cli_err(err, "%s: header sizes overflow: %lld x %lld x %lld voxels is more than swi "
                    "accepts (2^40)", path, (long long)dim[1], (long long)dim[2],
                    (long long)dim[3]);
            return -1;
        }
        nvox *= dim[i];
    }

    /* Datatype. */
    int nbyper = scalar_size(datatype);
    if (nbyper == 0) {
        if (is_known_type(datatype))
            cli_err(err, "%s: unsupported datatype %s (code %d); swi reads scalar voxels "
                    "(integers and floats)", path, nifti_datatype_string(datatype), datatype);
        else
            cli_err(err, "%s: corrupt header: unknown datatype code %d", path, datatype);
        return -1;
    }

    /* Data offset. */
    int64_t hsize = version == 1 ? 348 : 540;
    if (!isfinite(vox_offset) || vox_offset < 0 || vox_offset > (double)INT32_MAX ||
        vox_offset != floor(vox_offset)) {
        cli_err(err, "%s: corrupt header: vox_offset = %g", path, vox_offset);
        return -1;
    }
    int64_t offset = (int64_t)vox_offset;
    if (offset < hsize)
        offset = hsize; /* as niftilib does */
    int64_t bytes = nvox * nbyper;
    if (!is_gz) {
        int64_t need = offset + bytes;
        if ((int64_t)st.st_size < need) {
            cli_err(err, "%s: truncated: the header describes %lld x %lld x %lld voxels "
                    "(%lld bytes from offset %lld) but the file has %lld bytes", path,
                    (long long)dim[1], (long long)dim[2], (long long)dim[3], (long long)bytes,
                    (long long)offset, (long long)st.st_size);
            return -1;
        }
    }

    /* Scaling: slope 0 or not finite means none (NIfTI and nibabel). */
    if (!isfinite(slope) || slope == 0) {
        slope = 1;
        inter = 0;
    } else if (!isfinite(inter)) {
        inter = 0;
    }

    v->size[0] = dim[1];
    v->size[1] = dim[2];
    v->size[2] = dim[3];
    v->datatype = datatype;
    v->nbyper = nbyper;
    v->slope = slope;
    v->inter = inter;
    v->offset = offset;
    return 0;
}

/* Convert + transpose: src is [nk][nj][ni] (file order), dst [ni][nj][nk]. Blocked along k so
 * both sides stream through cache lines. */
#define KB 16
#define CONVERT(T, EXPR_OF_X)                                                                  \
    do {                                                                                       \
        const T *s = (const T *)src;                                                           \
        for (int64_t k0 = 0; k0 < nk; k0 += KB) {                                              \
            int64_t kn = nk - k0 < KB ? nk - k0 : KB;                                          \
            for (int64_t j = 0; j < nj; j++)                                                   \
                for (int64_t i = 0; i < ni; i++) {                                             \
                    float *d = dst + (i * nj + j) * nk + k0;                                   \
                    const T *p = s + i + ni * (j + nj * k0);                                   \
                    for (int64_t kk = 0; kk < kn; kk++) {                                      \
                        double x = (double)p[kk * plane];                                      \
                        d[kk] = (float)(EXPR_OF_X);                                            \
                    }                                                                          \
                }                                                                              \
        }                                                                                      \
    } while (0)

static void convert(const void *src, int datatype, const int64_t size[3], double slope,
                    double inter, float *dst)
{
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
            CONVERT(float, x * slope + inter);
        else
            CONVERT(float, x);
        break;
    case NIFTI_TYPE_FLOAT64: CONVERT(double, scaled ? x * slope + inter : x); break;
    case NIFTI_TYPE_FLOAT128: {
        /* long double does not fit the double-based macro without losing range first;
         * convert it the same way through long double. */
        const long double *s = (const long double *)src;
        for (int64_t k = 0; k < nk; k++)
            for (int64_t j = 0; j < nj; j++)
                for (int64_t i = 0; i < ni; i++) {
                    long double x = s[i + ni * (j + nj * k)];
                    if (scaled)
                        x = x * (long double)slope + (long double)inter;
                    dst[(i * nj + j) * nk + k] = (float)x;
                }
        break;
    }
    default: break;
    }
}

int nifti_vol_load(const nifti_vol *v, float *dst, char *err)
{
    quiet_niftilib();
    /* The image structure comes from the header we validated, not from nifti_image_read():
     * niftilib finds files by their base name, and asked for X.nii.gz it would read the
     * voxels of a sibling X.nii. The conversion also settles byte order and swapping. */
    nifti_image *nim;
    if (v->version == 1) {
        nifti_1_header h;
        memcpy(&h, v->raw, sizeof h);
        nim = nifti_convert_n1hdr2nim(h, v->path);
    } else {
        nifti_2_header h;
        memcpy(&h, v->raw, sizeof h);
        nim = nifti_convert_n2hdr2nim(h, v->path);
    }
    if (!nim) {
        cli_err(err, "%s: niftilib could not use the header", v->path);
        return -1;
    }
    /* niftilib must see what we validated. */
    if (nim->nx != v->size[0] || nim->ny != v->size[1] || nim->nz != v->size[2] ||
        nim->nvox != v->size[0] * v->size[1] * v->size[2] || nim->datatype != v->datatype ||
        nim->nbyper != v->nbyper || nim->iname_offset != v->offset) {
        cli_err(err, "%s: inconsistent header (niftilib reads %lldx%lldx%lld of type %d)",
                v->path, (long long)nim->nx, (long long)nim->ny, (long long)nim->nz,
                nim->datatype);
        nifti_image_free(nim);
        return -1;
    }
    if (cli_interrupted()) {
        nifti_image_free(nim);
        cli_err(err, "interrupted");
        return -1;
    }
    const int64_t ntot = nim->nvox * nim->nbyper;
    void *buf = malloc((size_t)ntot);
    if (!buf) {
        char b[32];
        cli_err(err, "%s: out of memory reading %s of voxels", v->path,
                cli_bytes((size_t)ntot, b));
        nifti_image_free(nim);
        return -1;
    }
    /* Exactly this file, decompressed when it is gzip data whatever its name says (zlib
     * reads plain files through the same path). */
    znzFile fp = znzopen(v->path, "rb", 1);
    int64_t got = -1;
    if (!znz_isnull(fp)) {
        if (znzseek(fp, (long)v->offset, SEEK_SET) >= 0)
            got = nifti_read_buffer(fp, buf, ntot, nim); /* short read fails; swaps */
        znzclose(fp);
    }
    if (got != ntot) {
        cli_err(err, "%s: truncated or corrupt voxel data (could not read %lld bytes from "
                "offset %lld)", v->path, (long long)ntot, (long long)v->offset);
        free(buf);
        nifti_image_free(nim);
        return -1;
    }
    convert(buf, v->datatype, v->size, v->slope, v->inter, dst);
    free(buf);
    nifti_image_free(nim);
    return 0;
}

void nifti_vol_make(nifti_vol *v, const int64_t size[3], const double spacing[3])
{
    memset(v, 0, sizeof *v);
    v->version = 1;
    nifti_1_header *h = (nifti_1_header *)v->hdr;
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
    v->datatype = NIFTI_TYPE_FLOAT32;
    v->nbyper = 4;
    v->slope = 1;
    v->offset = 352;
}

/* ---- writing --------------------------------------------------------------- */

typedef struct sink {
    int fd;
    gzFile gz;
    const char *name;
    char *err;
    int failed;
} sink;

static int sink_write(sink *s, const void *buf, size_t n)
{
    if (s->failed)
        return -1;
    if (cli_interrupted()) {
        cli_err(s->err, "interrupted");
        s->failed = 1;
        return -1;
    }
    const unsigned char *p = buf;
    while (n > 0) {
        size_t chunk = n > (1u << 30) ? (1u << 30) : n;
        if (s->gz) {
            int w = gzwrite(s->gz, p, (unsigned)chunk);
            if (w <= 0) {
                int zerr = 0;
                const char *m = gzerror(s->gz, &zerr);
                cli_err(s->err, "%s: write failed: %s", s->name,
                        zerr == Z_ERRNO ? strerror(errno) : (m ? m : "zlib error"));
                s->failed = 1;
                return -1;
            }
            chunk = (size_t)w;
        } else {
            ssize_t w = write(s->fd, p, chunk);
            if (w < 0 && errno == EINTR)
                continue;
            if (w <= 0) {
                cli_err(s->err, "%s: write failed: %s", s->name,
                        w < 0 ? strerror(errno) : "no progress");
                s->failed = 1;
                return -1;
            }
            chunk = (size_t)w;
        }
        p += chunk;
        n -= chunk;
    }
    return 0;
}

static int out_nbyper(nifti_out_type t)
{
    return t == NIFTI_OUT_UINT8 ? 1 : t == NIFTI_OUT_UINT16 ? 2 : 4;
}

static int out_datatype(nifti_out_type t)
{
    return t == NIFTI_OUT_UINT8 ? NIFTI_TYPE_UINT8
         : t == NIFTI_OUT_UINT16 ? NIFTI_TYPE_UINT16 : NIFTI_TYPE_FLOAT32;
}

/* Fill the header of an output from the input's: only data-describing fields change. */
static size_t make_header(const nifti_vol *like, nifti_out_type type, nifti_out_kind kind,
                          int64_t channels, int64_t classes, unsigned char *out)
{
    int dt = out_datatype(type);
    int bitpix = 8 * out_nbyper(type);
    const char *intent_name = kind == NIFTI_OUT_LABELS ? "labels"
                            : kind == NIFTI_OUT_SCORES ? "scores" : "";
    int intent = kind == NIFTI_OUT_LABELS ? NIFTI_INTENT_LABEL : NIFTI_INTENT_NONE;
    if (like->version == 2) {
        nifti_2_header h;
        memcpy(&h, like->hdr, sizeof h);
        h.sizeof_hdr = 540;
        memcpy(h.magic, "n+2\0\r\n\032\n", 8);
        h.datatype = (int16_t)dt;
        h.bitpix = (int16_t)bitpix;
        h.dim[0] = channels > 1 ? 4 : 3;
        for (int i = 0; i < 3; i++)
            h.dim[i + 1] = like->size[i];
        h.dim[4] = channels > 1 ? channels : 1;
        for (int i = 5; i < 8; i++)
            h.dim[i] = 1;
        h.vox_offset = 544;
        h.scl_slope = 1;
        h.scl_inter = 0;
        h.cal_min = 0;
        h.cal_max = kind == NIFTI_OUT_LABELS ? (double)(classes - 1) : 0;
        h.intent_code = intent;
        h.intent_p1 = h.intent_p2 = h.intent_p3 = 0;
        memset(h.intent_name, 0, sizeof h.intent_name);
        strncpy(h.intent_name, intent_name, sizeof h.intent_name - 1);
        if (channels > 1 && h.pixdim[4] == 0)
            h.pixdim[4] = 1;
        memcpy(out, &h, sizeof h);
        memset(out + sizeof h, 0, 4); /* no extensions */
        return sizeof h + 4;
    } else {
        nifti_1_header h;
        memcpy(&h, like->hdr, sizeof h);
        h.sizeof_hdr = 348;
        memcpy(h.magic, "n+1", 4);
        h.datatype = (short)dt;
        h.bitpix = (short)bitpix;
        h.dim[0] = channels > 1 ? 4 : 3;
        for (int i = 0; i < 3; i++)
            h.dim[i + 1] = (short)like->size[i];
        h.dim[4] = (short)(channels > 1 ? channels : 1);
        for (int i = 5; i < 8; i++)
            h.dim[i] = 1;
        h.vox_offset = 352;
        h.scl_slope = 1;
        h.scl_inter = 0;
        h.cal_min = 0;
        h.cal_max = kind == NIFTI_OUT_LABELS ? (float)(classes - 1) : 0;
        h.intent_code = (short)intent;
        h.intent_p1 = h.intent_p2 = h.intent_p3 = 0;
        memset(h.intent_name, 0, sizeof h.intent_name);
        strncpy(h.intent_name, intent_name, sizeof h.intent_name - 1);
        h.glmax = h.glmin = 0;
        if (channels > 1 && h.pixdim[4] == 0)
            h.pixdim[4] = 1;
        memcpy(out, &h, sizeof h);
        memset(out + sizeof h, 0, 4);
        return sizeof h + 4;
    }
}

int nifti_write_fd(int fd, int gz, const char *name, const nifti_vol *like, const void *data,
                   nifti_out_type type, nifti_out_kind kind, int64_t channels, int64_t classes,
                   char *err)
{
    const int64_t ni = like->size[0], nj = like->size[1], nk = like->size[2];
    if (like->version == 1 && (ni > 32767 || nj > 32767 || nk > 32767 || channels > 32767)) {
        close(fd);
        cli_err(err, "%s: a NIfTI-1 dimension cannot exceed 32767", name);
        return -1;
    }
    const size_t nb = (size_t)out_nbyper(type);
    int64_t kb = KB < nk ? KB : nk;
    size_t slab = (size_t)(ni * nj * kb) * nb;
    unsigned char *buf = malloc(slab);
    if (!buf) {
        close(fd);
        cli_err(err, "%s: out of memory", name);
        return -1;
    }
    sink s = { fd, NULL, name, err, 0 };
    if (gz) {
        /* Label maps compress well at any level; float scores are large: favour speed. */
        int level = type == NIFTI_OUT_FLOAT32 ? 1 : 6;
        char mode[8];
        snprintf(mode, sizeof mode, "wb%d", level);
        s.gz = gzdopen(fd, mode);
        if (!s.gz) {
            close(fd);
            free(buf);
            cli_err(err, "%s: cannot start compression", name);
            return -1;
        }
        gzbuffer(s.gz, 1u << 20);
    }
    unsigned char hdr[560];
    size_t hlen = make_header(like, type, kind, channels, classes, hdr);
    sink_write(&s, hdr, hlen);

    const int64_t plane = ni * nj, vol = plane * nk;
    for (int64_t c = 0; c < channels && !s.failed; c++) {
        const unsigned char *src = (const unsigned char *)data + (size_t)(c * vol) * nb;
        for (int64_t k0 = 0; k0 < nk && !s.failed; k0 += KB) {
            int64_t kn = nk - k0 < KB ? nk - k0 : KB;
            /* buf[kk][j][i] = src[i][j][k0 + kk] */
            for (int64_t i = 0; i < ni; i++)
                for (int64_t j = 0; j < nj; j++) {
                    const unsigned char *p = src + (size_t)((i * nj + j) * nk + k0) * nb;
                    unsigned char *q = buf + (size_t)(j * ni + i) * nb;
                    switch (nb) {
                    case 1:
                        for (int64_t kk = 0; kk < kn; kk++)
                            q[kk * plane] = p[kk];
                        break;
                    case 2:
                        for (int64_t kk = 0; kk < kn; kk++)
                            memcpy(q + (size_t)(kk * plane) * 2, p + kk * 2, 2);
                        break;
                    default:
                        for (int64_t kk = 0; kk < kn; kk++)
                            memcpy(q + (size_t)(kk * plane) * 4, p + kk * 4, 4);
                        break;
                    }
                }
            sink_write(&s, buf, (size_t)(plane * kn) * nb);
        }
    }
    free(buf);
    if (s.gz) {
        int rc = gzclose(s.gz); /* closes fd */
        if (rc != Z_OK && !s.failed) {
            cli_err(err, "%s: write failed: %s", name,
                    rc == Z_ERRNO ? strerror(errno) : "zlib error on close");
            s.failed = 1;
        }
    } else {
        if (close(fd) != 0 && !s.failed) {
            cli_err(err, "%s: write failed: %s", name, strerror(errno));
            s.failed = 1;
        }
    }
    return s.failed ? -1 : 0;
}

#endif /* SWI_HAVE_NIFTI */
