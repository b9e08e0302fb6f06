/* nifti_write.c -- NIfTI-1/-2 out: the input's header with the data fields changed, the
 * voxels through zlib with every write checked. */
#include "io_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef SWI_HAVE_NIFTI

swi_status io__nifti_write_fd(int fd, int gz, const char *name, const swi_volume *like, const void *data,
                              swi_dtype dtype, swi_io_kind kind, int64_t planes, int64_t classes,
                              const swi_io_cancel *cancel, char *err, size_t n) {
    (void)gz, (void)like, (void)data, (void)dtype, (void)kind, (void)planes, (void)classes;
    (void)cancel;
    if (fd >= 0) close(fd);
    io__err(err, n,
            "%s: swi_io was built without NIfTI support (install libnifti2-dev and "
            "rebuild)",
            name ? name : "NIfTI");
    return SWI_ERR_INVALID_ARG;
}

#else /* SWI_HAVE_NIFTI */

#include <nifti2_io.h>
#include <zlib.h>

#include "io_gzip.h"

/* Slabs of KB planes along k: both sides of the transpose stream through cache lines. */
#define KB 16

typedef struct sink {
    int fd;
    gzFile gz;
    io_gzw *dz; /* libdeflate's writer (io/gzip.c), used instead of gz when built in */
    const char *name;
    char *err;
    size_t errlen;
    const swi_io_cancel *cancel;
    swi_status failed; /* SWI_OK until the first failure */
} sink;

static int sink_write(sink *s, const void *buf, size_t n) {
    if (s->failed) return -1;
    if (io__cancelled(s->cancel)) {
        io__err(s->err, s->errlen, "interrupted");
        s->failed = SWI_ERR_CANCELLED;
        return -1;
    }
    const unsigned char *p = buf;
    while (n > 0) {
        size_t chunk = n > (1u << 30) ? (1u << 30) : n;
        if (s->dz) {
            int e = io__gzw_write(s->dz, p, chunk);
            if (e) {
                io__err(s->err, s->errlen, "%s: write failed: %s", s->name,
                        e == ENOMEM ? "out of memory" : strerror(e));
                s->failed = e == ENOMEM ? SWI_ERR_NOMEM : SWI_ERR_IO;
                return -1;
            }
        } else if (s->gz) {
            int w = gzwrite(s->gz, p, (unsigned)chunk);
            if (w <= 0) {
                int zerr = 0;
                const char *m = gzerror(s->gz, &zerr);
                io__err(s->err, s->errlen, "%s: write failed: %s", s->name,
                        zerr == Z_ERRNO ? strerror(errno) : (m ? m : "zlib error"));
                s->failed = zerr == Z_MEM_ERROR ? SWI_ERR_NOMEM : SWI_ERR_IO;
                return -1;
            }
            chunk = (size_t)w;
        } else {
            ssize_t w = write(s->fd, p, chunk);
            if (w < 0 && errno == EINTR) continue;
            if (w <= 0) {
                io__err(s->err, s->errlen, "%s: write failed: %s", s->name,
                        w < 0 ? strerror(errno) : "no progress");
                s->failed = SWI_ERR_IO;
                return -1;
            }
            chunk = (size_t)w;
        }
        p += chunk;
        n -= chunk;
    }
    return 0;
}

static int out_nbyper(swi_dtype t) { return t == SWI_DTYPE_UINT8 ? 1 : t == SWI_DTYPE_UINT16 ? 2 : 4; }

static int out_datatype(swi_dtype t) {
    return t == SWI_DTYPE_UINT8    ? NIFTI_TYPE_UINT8
           : t == SWI_DTYPE_UINT16 ? NIFTI_TYPE_UINT16
                                   : NIFTI_TYPE_FLOAT32;
}

/* Fill the header of an output from the input's: only data-describing fields change. */
static size_t make_header(const swi_volume *like, swi_dtype type, swi_io_kind kind, int64_t channels,
                          int64_t classes, unsigned char *out) {
    int dt = out_datatype(type);
    int bitpix = 8 * out_nbyper(type);
    const char *intent_name = kind == SWI_IO_LABELS ? "labels" : kind == SWI_IO_SCORES ? "scores" : "";
    int intent = kind == SWI_IO_LABELS ? NIFTI_INTENT_LABEL : NIFTI_INTENT_NONE;
    if (like->fmt.nifti.version == 2) {
        nifti_2_header h;
        memcpy(&h, like->fmt.nifti.hdr, sizeof h);
        h.sizeof_hdr = 540;
        memcpy(h.magic, "n+2\0\r\n\032\n", 8);
        h.datatype = (int16_t)dt;
        h.bitpix = (int16_t)bitpix;
        h.dim[0] = channels > 1 ? 4 : 3;
        for (int i = 0; i < 3; i++) h.dim[i + 1] = like->size[i];
        h.dim[4] = channels > 1 ? channels : 1;
        for (int i = 5; i < 8; i++) h.dim[i] = 1;
        h.vox_offset = 544;
        h.scl_slope = 1;
        h.scl_inter = 0;
        h.cal_min = 0;
        h.cal_max = kind == SWI_IO_LABELS ? (double)(classes - 1) : 0;
        h.intent_code = intent;
        h.intent_p1 = h.intent_p2 = h.intent_p3 = 0;
        memset(h.intent_name, 0, sizeof h.intent_name);
        strncpy(h.intent_name, intent_name, sizeof h.intent_name - 1);
        if (channels > 1 && h.pixdim[4] == 0) h.pixdim[4] = 1;
        memcpy(out, &h, sizeof h);
        memset(out + sizeof h, 0, 4); /* no extensions */
        return sizeof h + 4;
    } else {
        nifti_1_header h;
        memcpy(&h, like->fmt.nifti.hdr, sizeof h);
        h.sizeof_hdr = 348;
        memcpy(h.magic, "n+1", 4);
        h.datatype = (short)dt;
        h.bitpix = (short)bitpix;
        h.dim[0] = channels > 1 ? 4 : 3;
        for (int i = 0; i < 3; i++) h.dim[i + 1] = (short)like->size[i];
        h.dim[4] = (short)(channels > 1 ? channels : 1);
        for (int i = 5; i < 8; i++) h.dim[i] = 1;
        h.vox_offset = 352;
        h.scl_slope = 1;
        h.scl_inter = 0;
        h.cal_min = 0;
        h.cal_max = kind == SWI_IO_LABELS ? (float)(classes - 1) : 0;
        h.intent_code = (short)intent;
        h.intent_p1 = h.intent_p2 = h.intent_p3 = 0;
        memset(h.intent_name, 0, sizeof h.intent_name);
        strncpy(h.intent_name, intent_name, sizeof h.intent_name - 1);
        h.glmax = h.glmin = 0;
        if (channels > 1 && h.pixdim[4] == 0) h.pixdim[4] = 1;
        memcpy(out, &h, sizeof h);
        memset(out + sizeof h, 0, 4);
        return sizeof h + 4;
    }
}

swi_status io__nifti_write_fd(int fd, int gz, const char *name, const swi_volume *like, const void *data,
                              swi_dtype type, swi_io_kind kind, int64_t channels, int64_t classes,
                              const swi_io_cancel *cancel, char *err, size_t n) {
    const int64_t ni = like->size[0], nj = like->size[1], nk = like->size[2];
    const char *bad = NULL;
    if (fd < 0)
        bad = "fd < 0";
    else if (like->format != SWI_IO_NIFTI || (like->fmt.nifti.version != 1 && like->fmt.nifti.version != 2))
        bad = "like is not an opened or made NIfTI volume";
    else if (type != SWI_DTYPE_UINT8 && type != SWI_DTYPE_UINT16 && type != SWI_DTYPE_FLOAT32)
        bad = "dtype must be SWI_DTYPE_UINT8, _UINT16 or _FLOAT32";
    else if (kind != SWI_IO_IMAGE && kind != SWI_IO_LABELS && kind != SWI_IO_SCORES)
        bad = "kind is not an swi_io_kind";
    else if (channels < 1 || channels > ((int64_t)1 << 31))
        bad = "planes must be 1..2^31";
    else if (ni < 1 || nj < 1 || nk < 1 || ni > IO_MAX_VOXELS / nj || ni * nj > IO_MAX_VOXELS / nk)
        bad = "like's sizes are not a volume";
    if (bad) {
        if (fd >= 0) close(fd);
        io__err(err, n, "%s: %s", name, bad);
        return SWI_ERR_INVALID_ARG;
    }
    if (like->fmt.nifti.version == 1 && (ni > 32767 || nj > 32767 || nk > 32767 || channels > 32767)) {
        close(fd);
        io__err(err, n, "%s: a NIfTI-1 dimension cannot exceed 32767", name);
        return SWI_ERR_INVALID_ARG;
    }
    const size_t nb = (size_t)out_nbyper(type);
    int64_t kb = KB < nk ? KB : nk;
    size_t slab = (size_t)(ni * nj * kb) * nb;
    unsigned char *buf = io__malloc(slab);
    if (!buf) {
        close(fd);
        io__err(err, n, "%s: out of memory", name);
        return SWI_ERR_NOMEM;
    }
    sink s = {fd, NULL, NULL, name, err, n, cancel, SWI_OK};
    if (gz && io__gz_fast()) {
        /* levels measured in bench/RESULTS.md ("Compression") */
        int level = type == SWI_DTYPE_FLOAT32 ? IO_GZ_LEVEL_FLOAT : IO_GZ_LEVEL_LABELS;
        size_t total = (size_t)(ni * nj * nk) * nb * (size_t)channels;
        s.dz = io__gzw_open(fd, level, type == SWI_DTYPE_FLOAT32, total);
        if (!s.dz) {
            close(fd);
            free(buf);
            io__err(err, n, "%s: out of memory starting compression", name);
            return SWI_ERR_NOMEM;
        }
    } else if (gz) {
        /* Label maps compress well at any level; float scores are large: favour speed. */
        int level = type == SWI_DTYPE_FLOAT32 ? 1 : 6;
        char mode[8];
        snprintf(mode, sizeof mode, "wb%d", level);
        s.gz = gzdopen(fd, mode);
        if (!s.gz) {
            close(fd);
            free(buf);
            io__err(err, n, "%s: cannot start compression", name);
            return SWI_ERR_NOMEM;
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
                        for (int64_t kk = 0; kk < kn; kk++) q[kk * plane] = p[kk];
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
    if (s.dz) {
        int e = io__gzw_close(s.dz); /* closes fd */
        if (e && !s.failed) {
            io__err(err, n, "%s: write failed: %s", name, e == ENOMEM ? "out of memory" : strerror(e));
            s.failed = e == ENOMEM ? SWI_ERR_NOMEM : SWI_ERR_IO;
        }
    } else if (s.gz) {
        int rc = gzclose(s.gz); /* closes fd */
        if (rc != Z_OK && !s.failed) {
            io__err(err, n, "%s: write failed: %s", name,
                    rc == Z_ERRNO ? strerror(errno) : "zlib error on close");
            s.failed = rc == Z_MEM_ERROR ? SWI_ERR_NOMEM : SWI_ERR_IO;
        }
    } else {
        if (close(fd) != 0 && !s.failed) {
            io__err(err, n, "%s: write failed: %s", name, strerror(errno));
            s.failed = SWI_ERR_IO;
        }
    }
    return s.failed;
}

#endif /* SWI_HAVE_NIFTI */
