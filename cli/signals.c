/* signals.c -- see signals.h. */
#include "signals.h"

#include "swi_io.h"
#include "swi_pipeline.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

/* How long a run may take to stop by itself after a signal. */
#define CLI_STOP_GRACE_MS 700
/* How long a child process (the converter) may take after that to end by itself and remove
 * what it was writing, and then, killed, to be gone. */
#define CLI_CHILD_GRACE_MS 5000
#define CLI_CHILD_KILL_MS 2000

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static volatile sig_atomic_t g_signal;
static void (*g_hook)(void *);
static void *g_hook_user;
static int g_started;
static sigset_t g_set;

int cli_interrupted(void) { return (int)g_signal; }

int cli_interrupted_cb(void *unused) {
    (void)unused;
    return g_signal != 0;
}

int cli_interrupt_status(void) { return 128 + (g_signal ? (int)g_signal : SIGINT); }

void cli_set_cancel_hook(void (*hook)(void *user), void *user) {
    pthread_mutex_lock(&g_lock);
    g_hook = hook;
    g_hook_user = user;
    pthread_mutex_unlock(&g_lock);
}

/* End the children, remove the temporaries not yet committed, say why, and end the
 * process now. */
static void stop_now(int sig, const char *why) {
    swi_child_kill_all(CLI_CHILD_KILL_MS);
    swi_job_remove_temporaries(); /* a commit in progress finishes first */
    char msg[200];
    int len = snprintf(msg, sizeof msg, "swi: %s, stopping now; no unfinished output is left\n", why);
    if (len > 0) {
        ssize_t w = write(2, msg, (size_t)len < sizeof msg ? (size_t)len : sizeof msg - 1);
        (void)w;
    }
    _exit(128 + sig);
}

/* The next of our signals within ms milliseconds, or 0. */
static int wait_signal(long ms) {
    struct timespec end, now;
    clock_gettime(CLOCK_MONOTONIC, &end);
    end.tv_sec += ms / 1000;
    end.tv_nsec += (ms % 1000) * 1000000L;
    if (end.tv_nsec >= 1000000000L) {
        end.tv_sec++;
        end.tv_nsec -= 1000000000L;
    }
    for (;;) {
        clock_gettime(CLOCK_MONOTONIC, &now);
        long long left = (long long)(end.tv_sec - now.tv_sec) * 1000000000LL + (end.tv_nsec - now.tv_nsec);
        if (left <= 0) return 0;
        struct timespec ts = {(time_t)(left / 1000000000LL), (long)(left % 1000000000LL)};
        int sig = sigtimedwait(&g_set, NULL, &ts);
        if (sig > 0) return sig;
        if (errno != EINTR) return 0;
    }
}

static void *signal_thread(void *arg) {
    (void)arg;
    for (;;) {
        int sig = 0;
        if (sigwait(&g_set, &sig) != 0) continue;
        g_signal = sig;
        /* Called under the lock, so cli_set_cancel_hook(NULL, ...) cannot return (and
         * its caller free what the hook uses) while the hook runs. */
        pthread_mutex_lock(&g_lock);
        if (g_hook) g_hook(g_hook_user);
        pthread_mutex_unlock(&g_lock);
        /* a child in its own process group (the converter) got no terminal's signal */
        swi_child_signal_all(sig);
        /* The run stops at its next cancellation point and cleans up. A step that has none
         * (a library call decompressing or writing a large block, a blocking system call)
         * must not keep it going: after CLI_STOP_GRACE_MS, or at a second signal, the
         * temporaries are removed here and the process ends. */
        int again = wait_signal(CLI_STOP_GRACE_MS);
        /* children still running get longer to end by themselves (a converter removing
         * its work in progress) before they are killed */
        int waited = 0;
        for (long t = 0; !again && t < CLI_CHILD_GRACE_MS && swi_child_running() > 0; t += 20, waited = 1)
            again = wait_signal(20);
        /* ended in time: its owner reaps it and ends the run, given the same grace */
        if (!again && waited && swi_child_running() == 0) again = wait_signal(CLI_STOP_GRACE_MS);
        char why[120];
        snprintf(why, sizeof why,
                 again ? "interrupted twice" : "interrupted by %s; the run did not stop by itself",
                 sig == SIGINT    ? "SIGINT"
                 : sig == SIGTERM ? "SIGTERM"
                                  : "SIGHUP");
        stop_now(again ? again : sig, why);
    }
    return NULL;
}

int cli_signals_start(void) {
    if (g_started) return 0;
    signal(SIGPIPE, SIG_IGN);
    sigemptyset(&g_set);
    sigaddset(&g_set, SIGINT);
    sigaddset(&g_set, SIGTERM);
    sigaddset(&g_set, SIGHUP);
    if (pthread_sigmask(SIG_BLOCK, &g_set, NULL) != 0) return -1;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, 64 * 1024);
    pthread_t t;
    int rc = pthread_create(&t, &attr, signal_thread, NULL);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
        pthread_sigmask(SIG_UNBLOCK, &g_set, NULL);
        return -1;
    }
    atexit(swi_job_remove_temporaries);
    g_started = 1;
    return 0;
}
