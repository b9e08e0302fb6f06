/*
 * util.h -- small helpers the front doors (the swi command, swi export, swi bench's
 * workloads) and the pipeline share (common/, not installed): error messages, number, list,
 * size and --shard parsing, byte formatting, peak memory, the clock.
 *
 * Convention: a function that can fail returns 0 on success and -1 on failure,
 * after writing one line (no trailing newline) into `err` (size SWI_ERRLEN) that
 * names the file or option and the problem.
 */
#ifndef SWI_CLI_UTIL_H
#define SWI_CLI_UTIL_H

#include <stddef.h>
#include <stdint.h>

#define SWI_ERRLEN 768

/** printf into err (truncating safely), newlines and tabs folded into spaces, other
 *  controls and bytes that are no UTF-8 escaped (termtext.h). */
void cli_err(char *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/** swi_message_one_line (swi.h), for the command's messages. */
void cli_one_line(char *s);

/** Strict parsers: whole string, no trailing garbage, range-checked. */
int cli_parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out);
int cli_parse_double(const char *s, double *out);

/** "1", "1,2,3": 1..cap comma-separated numbers; returns how many, -1 on error. */
int cli_parse_i64_list(const char *s, int64_t *out, int cap);
int cli_parse_double_list(const char *s, double *out, int cap);

/** Memory size: "123" (bytes), "64K", "512M", "4G", "1.5G", "2T", also with a
 *  trailing "B", "iB" (binary multiples either way). Returns 0 or -1. */
int cli_parse_size(const char *s, size_t *out);

/** swi_format_bytes (swi.h) into a 32-byte buffer: "1.18 GiB", "312 MiB". */
const char *cli_bytes(size_t n, char buf[32]);

/** Peak resident set size of this process, in bytes (getrusage). */
size_t cli_peak_rss(void);

/** Monotonic clock, seconds. */
double cli_now(void);

/** Does `path` end with `suffix`, compared case-insensitively? */
int cli_ends_with(const char *path, const char *suffix);

/** Number of online CPUs (>= 1). */
int cli_cpu_count(void);

/** A tensor shape as "[?,1,32,32,32]" (negative sizes are dynamic: "?"). */
void cli_shape_str(const int64_t *s, int rank, char *buf, size_t n);

/* Is `name` a store (x.zarr, x.ome.zarr, x.h5:/path)? (storename.c) */
int cli_is_store(const char *name);

/* --shard: "I/N" (0 <= I < N) or "init". 0, or -1 with err (SWI_ERRLEN bytes). */
int cli_shard_parse(const char *s, int *part, int *parts, int *init, char *err);

/* --shard-grid: "AxBxC", each >= 1, the product at most 1048576. 0, or -1 with err. */
int cli_shard_grid_parse(const char *s, int grid[3], char *err);

#endif
