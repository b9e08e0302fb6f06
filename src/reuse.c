/* reuse.c -- exact window reuse.
 *
 * Real volumes hold many windows whose input is bitwise identical (air clipped to one
 * value, zero padding, dark microscopy background); a deterministic network gives them
 * bitwise identical outputs. Each gathered window is hashed; a window equal (byte for
 * byte, not only by hash) to an earlier one of the same batch, or to a cached one,
 * takes that output instead of a predictor call.
 *
 * Caching every output would cost C x window floats per window, so while the cache has
 * a free slot a window run is kept at once, and once it is full a window takes a slot only
 * on its second sighting: the hashes of windows run once are remembered (cheap), a window
 * whose hash was seen before is run again and then kept, with its input for the byte
 * comparison. Entries that were hit are kept in preference to new
 * ones (evict the fewest hits, then the oldest), so the background window, once in,
 * stays. The same code runs without outputs for the planner's count of reused windows. */
#include "internal.h"

#include <string.h>

uint64_t swi__reuse_hash(const float *x, size_t n) {
    const unsigned char *p = (const unsigned char *)x;
    size_t bytes = n * sizeof(float), i = 0;
    uint64_t h = 0x9E3779B97F4A7C15ull ^ (uint64_t)bytes;
    for (; i + 8 <= bytes; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        h = (h ^ w) * 0xBF58476D1CE4E5B9ull;
        h ^= h >> 31;
    }
    if (i < bytes) {
        uint64_t w = 0;
        memcpy(&w, p + i, bytes - i);
        h = (h ^ w) * 0xBF58476D1CE4E5B9ull;
    }
    h ^= h >> 29;
    return h * 0x94D049BB133111EBull;
}

swi_status swi__reuse_init(reuse_cache *c, int cap, size_t in_floats, int n_heads, const size_t *out_floats) {
    memset(c, 0, sizeof *c);
    c->cap = cap;
    c->in_floats = in_floats;
    c->n_heads = n_heads;
    for (int h = 0; h < n_heads; h++) c->out_floats[h] = out_floats ? out_floats[h] : 0;
    c->with_outputs = out_floats != NULL;
    if (cap > 0) {
        c->e = swi__calloc((size_t)cap, sizeof *c->e);
        if (!c->e) return SWI_ERR_NOMEM;
    }
    /* every entry's buffers now, as the plan counts them: admitting a window never fails
     * (pages are touched only when an entry is filled) */
    for (int i = 0; i < cap; i++) {
        int ok = (c->e[i].input = swi__malloc(in_floats * sizeof(float))) != NULL;
        for (int h = 0; ok && c->with_outputs && h < n_heads; h++)
            ok = (c->e[i].out[h] = swi__malloc(c->out_floats[h] * sizeof(float))) != NULL;
        if (!ok) {
            swi__reuse_free(c);
            return SWI_ERR_NOMEM;
        }
    }
    return SWI_OK;
}

void swi__reuse_free(reuse_cache *c) {
    for (int i = 0; i < c->cap && c->e; i++) {
        swi__free(c->e[i].input);
        for (int h = 0; h < c->n_heads; h++) swi__free(c->e[i].out[h]);
    }
    swi__free(c->e);
    memset(c, 0, sizeof *c);
}

int swi__reuse_find(reuse_cache *c, uint64_t hash, const float *input) {
    for (int i = 0; i < c->n; i++)
        if (c->e[i].hash == hash && memcmp(c->e[i].input, input, c->in_floats * sizeof(float)) == 0) {
            c->e[i].hits++;
            c->e[i].stamp = ++c->clock;
            return i;
        }
    return -1;
}

/* A window was run: keep it while a slot is free, else remember its hash and keep it on its
 * second sighting. Returns the entry whose outputs the caller fills, or -1 (not kept). */
int swi__reuse_admit(reuse_cache *c, uint64_t hash, const float *input) {
    if (c->cap <= 0) return -1;
    int seen = 0;
    for (int i = 0; i < SWI_REUSE_SEEN && !seen; i++) seen = c->seen_n > i && c->seen[i] == hash;
    if (!seen) {
        c->seen[c->seen_next] = hash;
        c->seen_next = (c->seen_next + 1) % SWI_REUSE_SEEN;
        if (c->seen_n < SWI_REUSE_SEEN) c->seen_n++;
        /* a free slot costs nothing the plan has not counted: keep it at once; a full
         * cache gives a slot only to a window seen twice */
        if (c->n >= c->cap) return -1;
    }
    int slot;
    if (c->n < c->cap) {
        slot = c->n++;
    } else {
        slot = 0;
        for (int i = 1; i < c->n; i++)
            if (c->e[i].hits < c->e[slot].hits ||
                (c->e[i].hits == c->e[slot].hits && c->e[i].stamp < c->e[slot].stamp))
                slot = i;
    }
    reuse_entry *e = &c->e[slot];
    e->hash = hash;
    e->hits = 0;
    e->stamp = ++c->clock;
    memcpy(e->input, input, c->in_floats * sizeof(float));
    return slot;
}
