/* termtext.c -- see termtext.h. */
#include "termtext.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* The length of the valid UTF-8 sequence at s (1..4) and its code point, or 0. */
static size_t utf8_at(const unsigned char *s, uint32_t *cp) {
    if (s[0] < 0x80) {
        *cp = s[0];
        return 1;
    }
    size_t len;
    uint32_t c, min;
    if (s[0] >= 0xc2 && s[0] <= 0xdf) {
        len = 2, c = s[0] & 0x1fu, min = 0x80;
    } else if (s[0] >= 0xe0 && s[0] <= 0xef) {
        len = 3, c = s[0] & 0x0fu, min = 0x800;
    } else if (s[0] >= 0xf0 && s[0] <= 0xf4) {
        len = 4, c = s[0] & 0x07u, min = 0x10000;
    } else {
        return 0;
    }
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80) return 0; /* also the terminating NUL */
        c = c << 6 | (s[i] & 0x3fu);
    }
    if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff)) return 0;
    *cp = c;
    return len;
}

/* Shown as an escape: controls, and the characters that reorder what follows them. */
static int hidden(uint32_t c) {
    return c < 0x20 || (c >= 0x7f && c <= 0x9f) || (c >= 0x202a && c <= 0x202e) ||
           (c >= 0x2066 && c <= 0x2069);
}

char *swi_term_text(const char *s, char *out, size_t n) {
    if (!out || n == 0) return out;
    size_t o = 0;
    const unsigned char *p = (const unsigned char *)(s ? s : "");
    while (*p) {
        char unit[16];
        uint32_t c = 0;
        size_t len = utf8_at(p, &c);
        size_t ul;
        if (len == 0) { /* no UTF-8: the byte */
            ul = (size_t)snprintf(unit, sizeof unit, "\\x%02x", p[0]);
            len = 1;
        } else if (!hidden(c)) {
            memcpy(unit, p, len);
            ul = len;
        } else if (c == '\n' || c == '\r' || c == '\t') {
            unit[0] = '\\';
            unit[1] = c == '\n' ? 'n' : c == '\r' ? 'r' : 't';
            ul = 2;
        } else if (c < 0x80) {
            ul = (size_t)snprintf(unit, sizeof unit, "\\x%02x", (unsigned)c);
        } else {
            ul = (size_t)snprintf(unit, sizeof unit, "\\u%04x", (unsigned)c);
        }
        if (o + ul >= n) break;
        memcpy(out + o, unit, ul);
        o += ul;
        p += len;
    }
    out[o] = '\0';
    return out;
}
