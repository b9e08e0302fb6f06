/*
 * signals.h -- clean interruption of the swi command.
 *
 * cli_signals_start() blocks SIGINT, SIGTERM and SIGHUP in the calling thread (call it
 * before any other thread exists, so every thread inherits the mask) and starts a thread
 * that waits for them with sigwait(). The first signal sets the interrupted flag, which
 * the progress and cancel hooks turn into cancellation, and calls the cancel hook (which
 * cancels the running job, swi_job_cancel); the main thread then cleans up and exits with
 * 128 + signal. A second signal, or a run still going 0.7 s after the first (a step
 * without a cancellation point: a blocking call, one large decompression), makes the
 * signal thread remove the temporaries (swi_job_remove_temporaries) and end the process
 * with 128 + signal. The child processes the command started (swi_io.h: swi_child_*) are
 * ended first: the signal is passed on to those in their own process group, those still
 * running 5 s later are killed, and the process ends only once they have. No work
 * happens inside an asynchronous signal handler.
 */
#ifndef SWI_CLI_SIGNALS_H
#define SWI_CLI_SIGNALS_H

/** Block the signals and start the waiting thread. Returns 0 or -1. Idempotent. */
int cli_signals_start(void);

/** The signal that interrupted us (SIGINT, SIGTERM, SIGHUP), or 0. */
int cli_interrupted(void);

/** Called (from the signal thread) on the first signal; NULL to clear. */
void cli_set_cancel_hook(void (*hook)(void *user), void *user);

/** cli_interrupted() != 0, as a stop test for library calls (swi_io_cancel). */
int cli_interrupted_cb(void *unused);

/** Exit status for an interruption: 128 + signal. */
int cli_interrupt_status(void);

#endif
