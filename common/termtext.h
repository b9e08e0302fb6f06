/*
 * termtext.h -- a name as a terminal may show it: what a terminal would act on instead of
 * showing (C0 controls, DEL, C1 controls, the bidirectional overrides and isolates) and
 * bytes that are no UTF-8 are written as visible escapes (\n, \r, \t, \x1b, \u009b,
 * \u202e), everything else as it is. For every user-controlled name the command prints (a
 * file or case name, a message quoting one), so that a name cannot move the cursor, recolour
 * or rewrite what the terminal shows. Applied twice it changes nothing more (a backslash
 * stays as it is).
 */
#ifndef SWI_COMMON_TERMTEXT_H
#define SWI_COMMON_TERMTEXT_H

#include <stddef.h>

/** Room for a message (SWI_ERRLEN) with every byte escaped. */
#define TERM_TEXT_LEN 3200

/** s (NULL: "") made safe into out[n]; truncated at a whole character or escape, always
 *  terminated. Returns out. */
char *swi_term_text(const char *s, char *out, size_t n);

/** swi_term_text into a buffer of the enclosing full expression's block: for printf's arguments. */
#define TERM_TEXT(s) swi_term_text((s), (char[TERM_TEXT_LEN]){0}, TERM_TEXT_LEN)

#endif
