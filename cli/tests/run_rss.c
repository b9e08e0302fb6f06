/*
 * run_rss.c -- run a command and write the peak resident set size of that command alone.
 *
 *     run_rss FILE COMMAND [ARGS...]
 *
 * Writes the peak RSS in KiB (wait4's ru_maxrss) to FILE and exits with the command's
 * status (128 + N after signal N). Linux keeps a process's peak across exec, so a child
 * forked from a large process (Python with numpy) would report the parent's size: this
 * small process does the fork for it.
 */
#define _DEFAULT_SOURCE /* wait4 */
#include <stdio.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: run_rss FILE COMMAND [ARGS...]\n");
        return 2;
    }
    pid_t pid = fork();
    if (pid < 0) {
        perror("run_rss: fork");
        return 126;
    }
    if (pid == 0) {
        execvp(argv[2], argv + 2);
        perror(argv[2]);
        _exit(127);
    }
    int status = 0;
    struct rusage ru;
    if (wait4(pid, &status, 0, &ru) != pid) {
        perror("run_rss: wait4");
        return 126;
    }
    FILE *f = fopen(argv[1], "w");
    if (!f || fprintf(f, "%ld\n", ru.ru_maxrss) < 0 || fclose(f) != 0) {
        perror(argv[1]);
        return 126;
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
