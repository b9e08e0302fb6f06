/*
 * children.h -- the processes this one starts that must not outlive it (the command's
 * converter, the folder mode's reader, the DICOM reader): not installed; here, below every
 * part that starts one. A stop signal is passed on to them, and a forced
 * stop (the swi command's signal thread, cli/signals.c) waits for them to end before the
 * process does, killing those that do not end within a grace period.
 *
 * Whoever starts a child tracks it from its start until it has seen it end, and reaps it
 * with swi_child_reap (or untracks it before its own waitpid): a tracked pid is never reaped,
 * so it is never signalled after it could have been reused.
 */
#ifndef SWI_IO_CHILDREN_H
#define SWI_IO_CHILDREN_H

#include <sys/types.h>

/** Track pid; group != 0: it leads its own process group (so a terminal's signals do not
 *  reach it), which swi_child_signal_all signals as a whole; such a child tracked after
 *  swi_child_signal_all gets that signal at once. 0, or -1 when full. */
int swi_child_track(pid_t pid, int group);

/** Stop tracking pid (before reaping it). */
void swi_child_untrack(pid_t pid);

/** Wait for pid to end (EINTR retried), untrack it, reap it: pid with *status, or -1. */
pid_t swi_child_reap(pid_t pid, int *status);

/** Pass sig on to every tracked child that leads its own group, now and when tracked
 *  later. (One in this process's group got a terminal's signal itself, and its owner ends
 *  it when it stops; swi_child_kill_all ends it when the owner does not in time.) */
void swi_child_signal_all(int sig);

/** How many tracked children that lead their own group (those swi_child_signal_all signals,
 *  given time to end by themselves) are still running. */
int swi_child_running(void);

/** Kill every tracked child (SIGKILL, its group too) and wait until each has ended (not
 *  reaping it: its owner may be waiting for it), at most `ms` milliseconds. */
void swi_child_kill_all(long ms);

#endif
