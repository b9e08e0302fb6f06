/*
 * safety.h -- outputs that appear only when complete.
 *
 * Every output is written to a temporary file in the same directory as the final
 * path (".NAME.swi-XXXXXX"), then committed: fsync, then rename() (with --force) or
 * link()+unlink() (without: an output that appeared meanwhile, e.g. from a second run
 * writing the same path, is never replaced). On any error the temporaries are
 * removed, so no partial file remains. The temporaries (and the folders registered with
 * cli_tmp_dir_add) are registered process-wide, so a forced stop can remove them
 * (swi_job_remove_temporaries).
 */
#ifndef SWI_CLI_SAFETY_H
#define SWI_CLI_SAFETY_H

#include <stddef.h>

typedef struct cli_out {
    char final[4096];
    char tmp[4096];
    int fd;     /**< open descriptor of tmp (-1 once handed over or closed) */
    int active; /**< tmp exists and is ours */
    /** Set after cli_out_begin, or NULL: an existing final for which it returns 1 at the
     *  commit is replaced without force (a side file swi wrote for an earlier output). */
    int (*replaceable)(const char *final);
} cli_out;

/** Refuse an existing `final` unless force (an existing non-regular file always), then
 *  create the temporary file next to it. */
int cli_out_begin(cli_out *o, const char *final, int force, char *err);

/** Take the descriptor (the writer closes it); the temporary stays registered. */
int cli_out_take_fd(cli_out *o);

/** fsync and move the temporary to the final path. */
int cli_out_commit(cli_out *o, int force, char *err);

/** cli_out_commit_all that stops (the message "interrupted") when cancelled(user) says so
 *  before anything is moved. */
int cli_out_commit_all_cancellable(cli_out *const *outs, int n, int force, int (*cancelled)(void *user),
                                   void *user, char *err);

/** Commit several outputs all or nothing: every temporary is fsync'ed first, then each
 *  is moved into place; if a move fails, those already moved are taken back (a file they
 *  replaced under --force is restored from a hard link kept until the end). NULL entries
 *  are skipped. */
int cli_out_commit_all(cli_out *const *outs, int n, int force, char *err);

/** Remove the temporary (if any). Safe to call twice. */
void cli_out_abort(cli_out *o);

/** Remove every registered temporary. Also installed with atexit(). */
void cli_out_abort_all(void);

/** A folder that a library writer makes beside an output and removes itself when it commits
 *  or aborts (swi_store_writer_temporary: a store's hidden replacement): the forced stop
 *  removes it too. The name is copied; NULL is ignored. Returns 0, or -1 when 8 are already
 *  registered (not fatal: the writer still removes it unless the run is forced to stop). */
int cli_tmp_dir_add(const char *path);

/** Forget every folder registered (their writers have committed or removed them). */
void cli_tmp_dirs_clear(void);

/** Check that an output path would be accepted (exists without force, is a directory,
 *  ...) without creating anything. */
int cli_out_check(const char *final, int force, char *err);

#endif
