// waker: wakes every US microseconds (timer slack 1 us) for SECONDS, doing nothing else.
#include <stdlib.h>
#include <sys/prctl.h>
#include <time.h>
int main(int argc, char **argv) {
	long us = atol(argv[1]); double secs = atof(argv[2]);
	prctl(PR_SET_TIMERSLACK, 1000UL);
	struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t);
	long n = (long)(secs * 1e6 / us);
	for (long i = 0; i < n; i++) {
		t.tv_nsec += us * 1000;
		while (t.tv_nsec >= 1000000000) { t.tv_nsec -= 1000000000; t.tv_sec++; }
		clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &t, NULL);
	}
	return 0;
}
