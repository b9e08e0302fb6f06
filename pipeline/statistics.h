/*
 * statistics.h -- per-class statistics of a label map (--statistics), gathered region by
 * region as the labels are made: voxels, volume, bounding box in scanner coordinates and the
 * input's intensity (mean, std, min, max) at the class's voxels. Regions may arrive from
 * several threads at once; each region's partial sums (shifted, in double) are kept and
 * merged at the end in the order of the regions' corners (Chan's parallel variance), so the
 * figures do not depend on the threads' timing, and no second pass over the volume is made.
 */
#ifndef SWI_PL_STATISTICS_H
#define SWI_PL_STATISTICS_H

#include <stddef.h>
#include <stdint.h>

#include "swi.h"
#include "swi_store.h"

typedef struct pl_stats pl_stats;

/* A collector for `classes` labels on a grid of `size` voxels whose voxel -> scanner (RAS+
 * mm) map is affine; names[0..classes-1] (borrowed) or NULL ("background", "label_N").
 * NULL when out of memory. */
pl_stats *pl_stats_new(int64_t classes, const char *const *names, const double affine[4][4],
                       const int64_t size[3]);

/* Where the intensities come from: the whole grid in memory [size] (borrowed), or a store
 * read box by box (borrowed; read only by the collector, under its lock). */
void pl_stats_intensity_array(pl_stats *st, const float *x);
void pl_stats_intensity_store(pl_stats *st, swi_store *store);

/* The labels of the box [lo, hi) of the grid: labels holds an array of lab_size voxels
 * whose voxel 0 is the grid's lab_origin (the whole grid: origin 0, size the grid's; one
 * region: origin lo, size hi - lo), label_bytes each. Thread-safe. 0, or -1 with the
 * reason in err (n bytes) -- out of memory, an intensity that cannot be read. */
int pl_stats_add(pl_stats *st, const int64_t lo[3], const int64_t hi[3], const void *labels, int label_bytes,
                 const int64_t lab_origin[3], const int64_t lab_size[3], char *err, size_t n);

/* The engine's region callback for an extra argmax output on the grid (user: the collector). */
int pl_stats_region(void *user, const swi_region *r);

/* The first failure of pl_stats_region, or NULL. */
const char *pl_stats_error(const pl_stats *st);

/* The statistics as JSON text, malloc'd (NULL when out of memory); `input` and `labels`
 * name the files in it (either may be NULL). Call once every region is in. */
char *pl_stats_json(pl_stats *st, const char *input, const char *labels);

void pl_stats_free(pl_stats *st);

/* body written to fd (closed in every case), path naming it in err. 0, or 1 with err
 * (SWI_ERRLEN bytes). */
int pl_write_text(int fd, const char *path, const char *body, char *err);

#endif
