/* cellmem.c -- memory for the partial sums of open cells.
 *
 * Cells open and close all the time and come in a few repeating sizes. Returning
 * their memory to the system and faulting it back in costs more than the blending
 * itself on some machines, so closed cells' buffers are kept on per-size free lists
 * and handed to the next cell of the same size -- but only while kept + live bytes
 * stay within the planned peak, so the cache never raises the peak. */
#include "internal.h"

#include <string.h>

void swi__cellmem_init(cellmem *m, size_t limit) {
    memset(m, 0, sizeof *m);
    m->limit = limit;
}

void *swi__cellmem_get(cellmem *m, size_t bytes) {
    for (int i = 0; i < m->n_sizes; i++) {
        if (m->size[i] == bytes && m->head[i]) {
            void *p = m->head[i];
            m->head[i] = *(void **)p;
            m->cached -= bytes;
            m->live += bytes;
            return p;
        }
    }
    /* no buffer of this size: give back cached ones of other sizes until the new one
     * fits under the limit, so cached + live never exceeds the planned peak */
    for (int i = 0; i < m->n_sizes && m->live + m->cached + bytes > m->limit; i++) {
        while (m->head[i] && m->live + m->cached + bytes > m->limit) {
            void *q = m->head[i];
            m->head[i] = *(void **)q;
            m->cached -= m->size[i];
            swi__big_free(q, m->size[i] < sizeof(void *) ? sizeof(void *) : m->size[i]);
        }
    }
    void *p = swi__big_alloc(bytes < sizeof(void *) ? sizeof(void *) : bytes);
    if (p) m->live += bytes;
    return p;
}

void swi__cellmem_put(cellmem *m, void *p, size_t bytes) {
    if (!p) return;
    m->live -= bytes;
    if (bytes >= sizeof(void *) && m->live + m->cached + bytes <= m->limit) {
        int i;
        for (i = 0; i < m->n_sizes && m->size[i] != bytes; i++) {
        }
        if (i < CELLMEM_SIZES) {
            if (i == m->n_sizes) {
                m->size[i] = bytes;
                m->head[i] = NULL;
                m->n_sizes++;
            }
            *(void **)p = m->head[i];
            m->head[i] = p;
            m->cached += bytes;
            return;
        }
    }
    swi__big_free(p, bytes < sizeof(void *) ? sizeof(void *) : bytes);
}

void swi__cellmem_free(cellmem *m) {
    for (int i = 0; i < m->n_sizes; i++) {
        void *p = m->head[i];
        while (p) {
            void *next = *(void **)p;
            swi__big_free(p, m->size[i] < sizeof(void *) ? sizeof(void *) : m->size[i]);
            p = next;
        }
        m->head[i] = NULL;
    }
    m->n_sizes = 0;
    m->cached = 0;
}
