/*
 * swi_export.h -- `swi export`: write the whole sliding-window pipeline (padding,
 * window extraction, the network, weighting, accumulation, normalization, crop,
 * optional argmax) as one ONNX model made of standard operators.
 *
 * Built as the static library target `swi_export` (only when protobuf-c and
 * Debian's onnx.proto are found) and as the standalone executable `swi-export`.
 */
#ifndef SWI_EXPORT_H
#define SWI_EXPORT_H

#ifdef __cplusplus
extern "C" {
#endif

/**
 * Run the export command. argv[0] is the command's name (used in messages, e.g.
 * "export" or "swi-export"), argv[1..argc-1] its options:
 *
 *   --model NET.onnx --output PIPE.onnx (--size D,H,W | --dynamic)
 *   [--roi R[,R,R]] [--overlap O[,O,O]] [--mode constant|gaussian]
 *   [--sigma-scale S[,S,S]] [--padding-mode constant|reflect|replicate|circular]
 *   [--cval V] [--argmax] [--head NAME|INDEX] [--per-image | --unroll] [--force] [--quiet]
 *   [--help]
 *
 * Messages go to stderr, a one-line summary to stdout (unless --quiet).
 * Returns the process exit status: 0 done, 1 failure (unreadable or unsupported
 * network, I/O error), 2 usage error (bad or missing option). Options are read
 * with getopt_long (which may reorder argv): one call at a time; it resets
 * getopt's state on entry, so it may be called any number of times.
 */
int swi_cmd_export(int argc, char **argv);

#ifdef __cplusplus
}
#endif
#endif
