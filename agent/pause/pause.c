/*
 * bosun's pause container: the process that holds a pod's namespaces.
 *
 * It sleeps until a signal arrives. With shareProcessNamespace it is PID 1
 * of the pod, so it reaps every orphan that is reparented to it (SIGCHLD ->
 * waitpid(-1, WNOHANG) until nothing is left). SIGTERM and SIGINT end it
 * with status 0 at once, so stopping a sandbox never waits for the grace
 * period. (PID 1 in a PID namespace gets no signal it has no handler for,
 * which is why every signal it obeys has one.)
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

static void on_terminate(int sig) {
  (void)sig;
  _exit(0);
}

static void on_child(int sig) {
  int saved = errno;
  (void)sig;
  while (waitpid(-1, NULL, WNOHANG) > 0) {
  }
  errno = saved;
}

int main(int argc, char **argv) {
  struct sigaction sa;

  if (argc > 1 && (strcmp(argv[1], "-v") == 0 || strcmp(argv[1], "--version") == 0)) {
    puts("bosun-pause");
    return 0;
  }

  memset(&sa, 0, sizeof(sa));
  sigemptyset(&sa.sa_mask);
  sa.sa_handler = on_terminate;
  if (sigaction(SIGTERM, &sa, NULL) < 0 || sigaction(SIGINT, &sa, NULL) < 0) {
    perror("pause: sigaction");
    return 1;
  }

  sa.sa_handler = on_child;
  sa.sa_flags = SA_NOCLDSTOP | SA_RESTART;
  if (sigaction(SIGCHLD, &sa, NULL) < 0) {
    perror("pause: sigaction");
    return 1;
  }

  if (getpid() != 1) {
    fputs("pause: not running as PID 1; orphans are reaped only when it is\n", stderr);
  }

  for (;;) {
    pause();
  }
  return 42; /* not reached */
}
