/* resample_internal.h -- what the files of resample/ share. */
#ifndef SWI_RESAMPLE_INTERNAL_H
#define SWI_RESAMPLE_INTERNAL_H

#include <stddef.h>

/* printf into err (errlen bytes; err may be NULL). */
void rs__err(char *err, size_t errlen, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* inv = m^-1; -1 when m is singular (|det| below 1e-12 of its scale). */
int rs__inv3(const double m[3][3], double inv[3][3]);

/* inv = a^-1 for an affine a (last row 0 0 0 1); -1 when singular. */
int rs__inv_affine(const double a[4][4], double inv[4][4]);

#endif
