/*
 * swi_resample.h -- bringing a scan to a model's grid and results back: orientation by
 * axis permutation and flips (MONAI's Orientationd), voxel spacing (MONAI's Spacingd
 * geometry, trilinear sampling with border clamping), and nnU-Net v2's resampling
 * (skimage's resize and its separate-z path, exact to scipy's splines).
 *
 * Link swi_resample (CMake: swi::resample). A client of swi.h only (libm, no I/O).
 *
 *     // example:begin
 *     swi_resample_orientation o;
 *     char err[256];
 *     if (swi_resample_orientation_make(affine, size, "RAS", &o, err, sizeof err) != SWI_OK) goto fail;
 *     // input voxel (i, j, k) is voxel y of the RAS grid; o.size and o.affine describe that grid
 *     int64_t y[3];
 *     swi_resample_orient_point(&o, (int64_t[3]){ i, j, k }, y);
 *     swi_resample_orient_copy(&o, image, ras, sizeof(float), 1, 0); // image [size] -> ras [o.size]
 *
 *     swi_resample_spacing_grid g;
 *     const double mm[3] = { 1.5, 1.5, 1.5 };
 *     if (swi_resample_spacing_grid_make(o.affine, o.size, mm, &g, err, sizeof err) != SWI_OK) goto fail;
 *     // dst [g.size]: every row in one call here (threads may take a band of rows each)
 *     swi_resample_trilinear(ras, o.size, dst, g.size, g.to_src, 1, 0, g.size[0]);
 *     return 0;
 * fail:
 *     fprintf(stderr, "%s\n", err);
 *     return 1;
 *     // example:end
 *
 * Geometry follows MONAI 1.4 (monai/data/utils.py, monai/transforms/spatial) and nibabel:
 *  - orientation: the input's axis codes are nibabel's io_orientation of the affine (the
 *    nearest orthogonal matrix of its direction cosines, each voxel axis given the world
 *    axis it is most parallel to, greedily in axis order); the target codes are letters of
 *    L/R, P/A, I/S, one per world axis. Oriented axis j is input axis src_axis[j], read
 *    backwards where flip[j]. The oriented affine is affine @ inv_ornt_aff (exact).
 *  - spacing: Spacingd(pixdim, diagonal=False, scale_extent=False): a target spacing within
 *    1e-3 of the input's keeps the input's; the new directions are the rotation part of
 *    the affine's QR factorisation (shear dropped); the shape is round(extent / pixdim + 1)
 *    of the input's corners (round half to even, as numpy); the grid starts at the input
 *    corner that is smallest along every new axis (within 1e-8), or, when no corner is
 *    (oblique or float32 affines), it is centred: offset = A (n / 2) + t - R (m / 2).
 *  - sampling: value at the continuous source index inv(src) @ dst @ (i, j, k), voxel
 *    centres at integers (align_corners=False), coordinates clamped to [0, n - 1] (padding
 *    "border", Spacingd's default), trilinear. Back to the input grid the same map runs
 *    the other way (Invertd).
 *
 * Errors follow swi.h: an swi_status, and a one-line message in err (errlen bytes, may be
 * NULL) naming what is wrong. Nothing is printed.
 */
#ifndef SWI_RESAMPLE_H
#define SWI_RESAMPLE_H

#include <stddef.h>
#include <stdint.h>

#include "swi.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- orientation ---------------------------------------------------------------- */

/** Parse three axis codes ("RAS", "LPS", "PIR", case-insensitive): world[j] is the world
 *  axis (0 = L/R, 1 = P/A, 2 = I/S) of axis j, sign[j] +1 towards R/A/S, -1 towards
 *  L/P/I. Fails on anything but three letters naming three distinct world axes. */
swi_status swi_resample_axcodes_parse(const char *codes, int world[3], int sign[3], char *err, size_t errlen);

/** The axis codes of an affine (nibabel's aff2axcodes), e.g. "LPS"; codes gets 4 bytes.
 *  Fails when the direction part is singular. */
swi_status swi_resample_axcodes_of(const double affine[4][4], char codes[4], char *err, size_t errlen);

/** How a grid is brought to target axis codes. */
typedef struct swi_resample_orientation {
    int src_axis[3];     /**< oriented axis j is input axis src_axis[j] */
    int flip[3];         /**< 1 where oriented axis j runs backwards along it */
    int64_t in_size[3];  /**< the input grid */
    int64_t size[3];     /**< the oriented grid: in_size[src_axis[j]] */
    double affine[4][4]; /**< the oriented grid's voxel -> world map */
} swi_resample_orientation;

/** Orientation of a grid (affine, size) to `codes` (see swi_resample_axcodes_parse). */
swi_status swi_resample_orientation_make(const double affine[4][4], const int64_t size[3], const char *codes,
                                         swi_resample_orientation *o, char *err, size_t errlen);

/** 1 when the orientation changes nothing. */
int swi_resample_orientation_is_identity(const swi_resample_orientation *o);

/** Input voxel (x[0], x[1], x[2]) -> its index along each oriented axis (y). */
void swi_resample_orient_point(const swi_resample_orientation *o, const int64_t x[3], int64_t y[3]);

/** Copy `planes` volumes of elem_bytes elements from the input grid (src) to the oriented
 *  grid (dst, inverse = 0), or back (inverse = 1). src and dst must not overlap. */
void swi_resample_orient_copy(const swi_resample_orientation *o, const void *src, void *dst,
                              size_t elem_bytes, int64_t planes, int inverse);

/** Read the box [lo, hi) of the oriented grid from the input grid: dst is
 *  [planes, *(hi - lo)], src [planes, *in_size]; floats. For swi_reader callbacks. */
void swi_resample_orient_read_box(const swi_resample_orientation *o, const float *src, int64_t planes,
                                  const int64_t lo[3], const int64_t hi[3], float *dst);

/** Write a region [lo, hi) of the oriented grid (src [planes, *(hi - lo)]) into the input
 *  grid (dst [planes, *in_size]). Distinct regions write distinct voxels, so region
 *  callbacks on several threads may call it at once. */
void swi_resample_orient_write_box(const swi_resample_orientation *o, const void *src, size_t elem_bytes,
                                   int64_t planes, const int64_t lo[3], const int64_t hi[3], void *dst);

/** map sends points to oriented indices; out sends the same points to input indices. */
void swi_resample_orient_to_input(const swi_resample_orientation *o, const double map[3][4],
                                  double out[3][4]);

/** map takes oriented indices; out takes input indices to the same place. */
void swi_resample_orient_from_input(const swi_resample_orientation *o, const double map[3][4],
                                    double out[3][4]);

/* ---- spacing -------------------------------------------------------------------- */

/** Largest number of voxels a resampled grid may have (2^40, as swi_io). */
#define SWI_RESAMPLE_MAX_VOXELS ((int64_t)1 << 40)

/** The grid Spacingd makes, and the voxel maps between it and the input grid. */
typedef struct swi_resample_spacing_grid {
    int64_t size[3];     /**< voxels of the new grid */
    double affine[4][4]; /**< its voxel -> world map */
    double pixdim[3];    /**< its spacing (the target, or the input's where within 1e-3) */
    int centred;         /**< 1: no input corner passed the corner test; the grid is centred */
    int identity;        /**< 1: the maps are the identity within 1e-3 and the shape is the
                                input's; MONAI then leaves the volume as it is, and so should
                                the caller */
    double to_src[3][4]; /**< new voxel -> continuous input index (inv(src) @ new) */
    double to_new[3][4]; /**< input voxel -> continuous new index (inv(new) @ src) */
} swi_resample_spacing_grid;

/** The grid of an input (affine, size) resampled to pixdim (mm, each > 0 and finite).
 *  Fails on bad spacings, singular affines and grids over SWI_RESAMPLE_MAX_VOXELS or an
 *  axis over SWI_MAX_AXIS (the message names the spacing and the size). */
swi_status swi_resample_spacing_grid_make(const double affine[4][4], const int64_t size[3],
                                          const double pixdim[3], swi_resample_spacing_grid *g, char *err,
                                          size_t errlen);

/** Trilinear resampling with border clamping: dst voxel (i, j, k) of plane p, for rows
 *  i in [row_lo, row_hi) of dst's first axis, is src plane p sampled at map @ (i, j, k, 1).
 *  src [planes, *src_size], dst [planes, row_hi - row_lo, dst_size[1], dst_size[2]]. */
void swi_resample_trilinear(const float *src, const int64_t src_size[3], float *dst,
                            const int64_t dst_size[3], const double map[3][4], int64_t planes, int64_t row_lo,
                            int64_t row_hi);

/** The rows [*lo, *hi) of src's first axis that dst rows [row_lo, row_hi) read (clamped to
 *  the source), for holding only a band of the source. */
void swi_resample_rows_needed(const int64_t src_size[3], const int64_t dst_size[3], const double map[3][4],
                              int64_t row_lo, int64_t row_hi, int64_t *lo, int64_t *hi);

/* ---- nnU-Net v2's resampling (default_resampling.py) -------------------------------- */

/** nnU-Net's compute_new_shape: new_shape[a] = round(old_spacing[a] / new_spacing[a] *
 *  old_shape[a]), Python's round (half to even). SWI_ERR_INVALID_ARG on a spacing that is
 *  not finite and > 0 or a shape < 1, SWI_ERR_OVERFLOW on a result outside 1..SWI_MAX_AXIS
 *  (new_shape is then unspecified). */
swi_status swi_resample_nnunet_shape(const double old_spacing[3], const double new_spacing[3],
                                     const int64_t old_shape[3], int64_t new_shape[3]);

/** nnU-Net's determine_do_sep_z_and_axis (ANISO_THRESHOLD 3): 1 and *axis the
 *  low-resolution axis when resampling from `current` to `target` spacing goes with
 *  separate z, else 0 and *axis = -1. force: -1 (null) decides from the current spacing
 *  (max / min > 3) and, when that is not anisotropic, from the target; 0 never; 1 always,
 *  the axis from the current spacing. The axis is the one whose spacing equals the
 *  maximum; when two or three share it there is no separate z. */
int swi_resample_nnunet_separate_z(const double current[3], const double target[3], int force, int *axis);

/** nnU-Net's resample_data_or_seg for data (is_seg false): `planes` volumes src
 *  [planes, *src_size] to dst [planes, *dst_size], C order, the last axis fastest.
 *  separate_axis -1: each plane as skimage.transform.resize(x, dst_size, order,
 *  mode='edge', anti_aliasing=False) in float64 (scipy.ndimage.zoom with grid_mode, mode
 *  'nearest', the spline prefilter for order > 1, clipped to the plane's input range for
 *  order > 0). separate_axis 0..2: each slice across that axis resized so in 2-D (order
 *  `order`, clipped to the slice's range), then that axis alone sampled with
 *  scipy.ndimage.map_coordinates(order=order_z, mode='nearest') at (o + 0.5) * in / out -
 *  0.5. The results are rounded to float32 once. Equal sizes copy src. order and order_z
 *  0..5. Scratch: about one plane in float64 beyond dst. */
swi_status swi_resample_nnunet(const float *src, const int64_t src_size[3], float *dst,
                               const int64_t dst_size[3], int64_t planes, int order, int order_z,
                               int separate_axis, char *err, size_t errlen);

/* ---- streaming back to the input grid ------------------------------------------------ */

/** Receives a completed region [lo, hi) of the output grid: data [channels, *(hi - lo)],
 *  valid during the call. Called from the threads that feed the sink, concurrently for
 *  distinct regions. Return non-zero to fail the feed. */
typedef int (*swi_resample_emit_fn)(void *user, const int64_t lo[3], const int64_t hi[3], int64_t channels,
                                    const float *data);

/** Trilinear resampling of a grid that arrives region by region, in any order, from any
 *  number of threads (swi_run's on_region of an SWI_REDUCE_CUSTOM output): every output
 *  voxel x is the source sampled at map @ x (border clamping), as swi_resample_trilinear.
 *  The output grid is cut into tiles; a tile is computed and emitted as soon as every
 *  source voxel it reads has arrived, and source voxels are kept (in small blocks) only
 *  while a pending tile still reads them: the band, never the whole source. */
typedef struct swi_resample_sink swi_resample_sink;

/** A sink from a source grid (src_size, channels planes) to an output grid (out_size);
 *  map sends output indices to source indices. tile: output tile edge (0 = 8). */
swi_status swi_resample_sink_create(const int64_t src_size[3], const int64_t out_size[3],
                                    const double map[3][4], int64_t channels, int tile,
                                    swi_resample_emit_fn emit, void *user, swi_resample_sink **out, char *err,
                                    size_t errlen);

/** Receives the argmax labels of a completed output region [lo, hi): [*(hi - lo)]. */
typedef int (*swi_resample_labels_fn)(void *user, const int64_t lo[3], const int64_t hi[3],
                                      const uint16_t *labels);

/** Emit labels instead of scores (before the first feed; channels <= 65536): the argmax of
 *  the resampled scores (lowest index wins ties, the first NaN wins), equal to the argmax
 *  of what the scores mode emits. Only the classes that can win in a tile are
 *  interpolated: a class whose largest source score within the tile's reach is below
 *  every voxel's best so far cannot win there (classes are tried from the largest such
 *  bound down; a tile whose sources hold a NaN or an infinity takes every class). */
swi_status swi_resample_sink_argmax(swi_resample_sink *s, swi_resample_labels_fn fn, void *user);

/** Along source axis source_axis (0..2; before the first feed) sample the nearest source
 *  index instead of interpolating linearly: scipy's order 0, floor(c + 0.5) of the
 *  coordinate clamped to the source. The map's row source_axis must read one output axis
 *  o only (else SWI_ERR_INVALID_ARG); when it is nnU-Net's (offset exactly 0.5 * scale -
 *  0.5) the coordinate is computed as nnU-Net does, (o + 0.5) * scale - 0.5, so that ties
 *  round alike. With the diagonal map (o + 0.5) * in / out - 0.5 this is nnU-Net's way back
 *  with separate z (order 1 in-plane, order_z 0 across): swi_resample_nnunet(order 1,
 *  order_z 0, separate_axis = source_axis) up to float32 rounding. Works in scores and
 *  argmax mode; tiles then wait for fewer source voxels. */
swi_status swi_resample_sink_nearest(swi_resample_sink *s, int source_axis, char *err, size_t errlen);

/** Feed the completed source region [lo, hi), data [channels, *(hi - lo)]. Thread-safe.
 *  Returns 0, or non-zero when emit failed or memory ran out (the sink is then failed). */
int swi_resample_sink_feed(swi_resample_sink *s, const int64_t lo[3], const int64_t hi[3], const float *data);

/** Only the output box [out_lo, out_hi) is wanted (before the first feed): the tiles that
 *  miss it are never emitted (finish counts them as done) and hold no source. src_lo/src_hi
 *  receive the source box the remaining tiles read -- feeding exactly that box emits every
 *  tile meeting the output box, each with the values a whole feed gives it (a region of
 *  interest: the engine runs a part of that box, swi_params.part_lo). SWI_ERR_INVALID_ARG
 *  for a box outside the grid, an empty one or a sink already fed. */
swi_status swi_resample_sink_restrict(swi_resample_sink *s, const int64_t out_lo[3], const int64_t out_hi[3],
                                      int64_t src_lo[3], int64_t src_hi[3]);

/** The source box swi_resample_sink_restrict would give for a sink of these arguments
 *  (linear on every axis: no swi_resample_sink_nearest), without making one: for planning.
 *  Allocates nothing. */
swi_status swi_resample_sink_source_box(const int64_t src_size[3], const int64_t out_size[3],
                                        const double map[3][4], int tile, const int64_t out_lo[3],
                                        const int64_t out_hi[3], int64_t src_lo[3], int64_t src_hi[3]);

/** After the last region: SWI_OK when every output tile was emitted. */
swi_status swi_resample_sink_finish(swi_resample_sink *s, char *err, size_t errlen);

/** Largest bytes of source voxels the sink held at once, so far. */
size_t swi_resample_sink_peak_bytes(const swi_resample_sink *s);

/** The sink's own bookkeeping (tiles, blocks, indexes): fixed at creation. */
size_t swi_resample_sink_fixed_bytes(const swi_resample_sink *s);

/** A prediction of the band for a source that completes in sweeps along source axis
 *  `outer` (swi_plan.order[0]): the slab of blocks the tiles straddling a sweep's edge hold
 *  until the next sweep, plus the bookkeeping. An estimate, not a bound: the regions within
 *  a sweep hold smaller slabs of their own meanwhile. */
size_t swi_resample_sink_plan_bytes(const int64_t src_size[3], const int64_t out_size[3],
                                    const double map[3][4], int64_t channels, int tile, int outer);

void swi_resample_sink_free(swi_resample_sink *s);

#ifdef __cplusplus
}
#endif
#endif /* SWI_RESAMPLE_H */
