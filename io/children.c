/* children.c -- the child processes to end with this one (swi_io.h: swi_child_*). */
#include "swi_io.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#define CHILD_SLOTS 64

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
    pid_t pid;
    int group;
} g_child[CHILD_SLOTS];
static int g_stop_sig; /* the signal passed on, 0 before any */

static void pass_on(pid_t pid, int group, int sig) {
    if (kill(group ? -pid : pid, sig) != 0 && group) kill(pid, sig); /* group not made yet */
}

int swi_child_track(pid_t pid, int group) {
    int rc = -1;
    pthread_mutex_lock(&g_lock);
    for (int i = 0; i < CHILD_SLOTS && rc != 0; i++) {
        if (g_child[i].pid != 0) continue;
        g_child[i].pid = pid;
        g_child[i].group = group;
        rc = 0;
    }
    if (g_stop_sig && (group || g_stop_sig == SIGKILL))
        pass_on(pid, group, g_stop_sig); /* started while the stop went round */
    pthread_mutex_unlock(&g_lock);
    return rc;
}

void swi_child_untrack(pid_t pid) {
    pthread_mutex_lock(&g_lock);
    for (int i = 0; i < CHILD_SLOTS; i++)
        if (g_child[i].pid == pid) g_child[i].pid = 0;
    pthread_mutex_unlock(&g_lock);
}

pid_t swi_child_reap(pid_t pid, int *status) {
    siginfo_t si;
    memset(&si, 0, sizeof si);
    /* seen ended but not reaped: untracked while the pid is still ours */
    while (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOWAIT) != 0 && errno == EINTR) {}
    swi_child_untrack(pid);
    pid_t w;
    while ((w = waitpid(pid, status, 0)) < 0 && errno == EINTR) {}
    return w;
}

void swi_child_signal_all(int sig) {
    pthread_mutex_lock(&g_lock);
    g_stop_sig = sig;
    for (int i = 0; i < CHILD_SLOTS; i++)
        if (g_child[i].pid > 0 && g_child[i].group) pass_on(g_child[i].pid, g_child[i].group, sig);
    pthread_mutex_unlock(&g_lock);
}

/* Under the lock: has the tracked pid not ended yet? */
static int running(pid_t pid) {
    siginfo_t si;
    memset(&si, 0, sizeof si);
    if (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) != 0) return 0; /* not ours */
    return si.si_pid == 0;
}

/* groups: only those leading their own group */
static int count_running(int groups) {
    int n = 0;
    pthread_mutex_lock(&g_lock);
    for (int i = 0; i < CHILD_SLOTS; i++)
        if (g_child[i].pid > 0 && (!groups || g_child[i].group) && running(g_child[i].pid)) n++;
    pthread_mutex_unlock(&g_lock);
    return n;
}

int swi_child_running(void) { return count_running(1); }

void swi_child_kill_all(long ms) {
    pthread_mutex_lock(&g_lock);
    g_stop_sig = SIGKILL;
    for (int i = 0; i < CHILD_SLOTS; i++)
        if (g_child[i].pid > 0) pass_on(g_child[i].pid, g_child[i].group, SIGKILL);
    pthread_mutex_unlock(&g_lock);
    const struct timespec step = {0, 5 * 1000 * 1000};
    for (long t = 0; t < ms && count_running(0) > 0; t += 5) nanosleep(&step, NULL);
}

int swi_child_spawnattr_init(posix_spawnattr_t *at, int own_group) {
    sigset_t none, dflt;
    sigemptyset(&none);
    sigemptyset(&dflt);
    sigaddset(&dflt, SIGINT);
    sigaddset(&dflt, SIGTERM);
    sigaddset(&dflt, SIGHUP);
    sigaddset(&dflt, SIGPIPE);
    int rc = posix_spawnattr_init(at);
    if (rc != 0) return rc;
    short flags = POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF;
    if (own_group) flags |= POSIX_SPAWN_SETPGROUP;
    if ((rc = posix_spawnattr_setsigmask(at, &none)) == 0 &&
        (rc = posix_spawnattr_setsigdefault(at, &dflt)) == 0 &&
        (!own_group || (rc = posix_spawnattr_setpgroup(at, 0)) == 0))
        rc = posix_spawnattr_setflags(at, flags);
    if (rc != 0) posix_spawnattr_destroy(at);
    return rc;
}
