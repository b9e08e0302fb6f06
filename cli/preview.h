/*
 * preview.h -- a PNG of three orthogonal mid-slices, labels overlaid.
 *
 * Panels, left to right: the k = nk/2 slice (columns i, rows j), the j = nj/2 slice
 * (columns i, rows k) and the i = ni/2 slice (columns j, rows k); rows run bottom-up.
 * The image is grey, windowed between its 0.5th and 99.5th percentiles; each label > 0 is
 * blended in its own colour. Small volumes are enlarged by an integer factor so the
 * preview is at least ~256 pixels tall; large ones are sampled down to at most 2048
 * pixels high and about 8192 wide, so any volume gets a preview.
 */
#ifndef SWI_CLI_PREVIEW_H
#define SWI_CLI_PREVIEW_H

#include <stdint.h>

/** Is PNG support compiled in? */
int preview_available(void);

/** Write the preview to the open descriptor fd (closed in every case). image is
 *  [ni][nj][nk] float32 (may be NULL: labels only); labels [ni][nj][nk] of 1 or 2 bytes per
 *  voxel (label_bytes), or NULL. */
int preview_write_fd(int fd, const char *name, const int64_t size[3], const float *image,
                     const void *labels, int label_bytes, char *err);

/** RGB colour of label l (l >= 1). */
void preview_label_color(int64_t l, unsigned char rgb[3]);

#endif
