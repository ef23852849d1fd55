/*
 * pause holds a pod's namespaces open. As PID 1 of the sandbox it must also
 * reap orphaned children and exit on SIGINT/SIGTERM (the runtime stops the
 * sandbox with TERM). Written for hwk; static, a few hundred KB.
 */
#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

static void stop(int sig) { _exit(sig == SIGTERM || sig == SIGINT ? 0 : 1); }

static void reap(int sig)
{
	(void)sig;
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
}

int main(int argc, char **argv)
{
	struct sigaction term = {.sa_handler = stop};
	struct sigaction chld = {.sa_handler = reap, .sa_flags = SA_NOCLDSTOP};

	if (argc > 1 && argv[1][0] == '-' && argv[1][1] == 'v') {
		printf("pause (hwk) " PAUSE_VERSION "\n");
		return 0;
	}
	if (getpid() != 1)
		fprintf(stderr, "pause: warning: not PID 1\n");
	if (sigaction(SIGINT, &term, NULL) || sigaction(SIGTERM, &term, NULL) ||
	    sigaction(SIGCHLD, &chld, NULL))
		return 2;
	for (;;)
		pause();
}
