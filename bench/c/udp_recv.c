// udp_recv: the C ceiling for ringbench's UDP scenario. One thread, one
// socket, recvmmsg(2) of 64 datagrams of up to 2 KiB into static buffers,
// counting them; with -r it sends each batch back to its senders with one
// sendmmsg(2). SIGUSR1 writes {"seq":N,"packets":COUNT} to STATS (through a
// temporary file and a rename), as ringecho -stats-file does; it writes it
// once at start too, which tells ringbench it is ready. SIGTERM or SIGINT
// ends it.
//
// -b BYTES sets the socket's receive buffer (SO_RCVBUF).
//
//   cc -O2 -o udp_recv udp_recv.c && ./udp_recv [-r] [-b BYTES] PORT STATS
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

enum { BATCH = 64, SIZE = 2048 };

static volatile sig_atomic_t stop, dump;
static void on_stop(int s) { (void)s; stop = 1; }
static void on_dump(int s) { (void)s; dump = 1; }

static int write_stats(const char *path, unsigned long long seq, unsigned long long packets) {
	char tmp[4096];
	snprintf(tmp, sizeof tmp, "%s.tmp", path);
	FILE *f = fopen(tmp, "w");
	if (!f)
		return -1;
	fprintf(f, "{\"seq\":%llu,\"packets\":%llu}", seq, packets);
	if (fclose(f) != 0)
		return -1;
	return rename(tmp, path);
}

int main(int argc, char **argv) {
	int reply = 0, rcvbuf = 0, a = 1;
	for (; a < argc && argv[a][0] == '-'; a++) {
		if (strcmp(argv[a], "-r") == 0)
			reply = 1;
		else if (strcmp(argv[a], "-b") == 0 && a + 1 < argc)
			rcvbuf = atoi(argv[++a]);
		else
			break;
	}
	if (argc - a != 2) {
		fprintf(stderr, "usage: udp_recv [-r] [-b BYTES] PORT STATS\n");
		return 2;
	}
	int port = atoi(argv[a]);
	const char *stats = argv[a + 1];

	struct sigaction sa = {0};
	sa.sa_handler = on_stop; // no SA_RESTART: a blocked recvmmsg returns EINTR
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sa.sa_handler = on_dump;
	sigaction(SIGUSR1, &sa, NULL);

	int fd = socket(AF_INET, SOCK_DGRAM, 0);
	if (fd < 0) {
		perror("socket");
		return 1;
	}
	if (rcvbuf > 0 && setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf) < 0) {
		perror("setsockopt SO_RCVBUF");
		return 1;
	}
	struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	if (bind(fd, (struct sockaddr *)&addr, sizeof addr) < 0) {
		perror("bind");
		return 1;
	}
	static char bufs[BATCH][SIZE];
	static struct iovec iov[BATCH];
	static struct sockaddr_in from[BATCH];
	static struct mmsghdr msgs[BATCH];
	unsigned long long packets = 0, seq = 0;
	if (write_stats(stats, seq++, 0) < 0) {
		perror("stats");
		return 1;
	}
	while (!stop) {
		if (dump) {
			dump = 0;
			write_stats(stats, seq++, packets);
		}
		for (int i = 0; i < BATCH; i++) {
			iov[i] = (struct iovec){bufs[i], SIZE};
			msgs[i].msg_hdr = (struct msghdr){.msg_name = &from[i], .msg_namelen = sizeof from[i], .msg_iov = &iov[i], .msg_iovlen = 1};
		}
		int n = recvmmsg(fd, msgs, BATCH, MSG_WAITFORONE, NULL);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			perror("recvmmsg");
			return 1;
		}
		packets += n;
		if (reply) {
			for (int i = 0; i < n; i++)
				iov[i].iov_len = msgs[i].msg_len;
			for (int done = 0; done < n;) {
				int m = sendmmsg(fd, msgs + done, n - done, 0);
				if (m < 0) {
					if (errno == EINTR)
						continue;
					break;
				}
				done += m;
			}
		}
	}
	fprintf(stderr, "udp_recv: %llu datagrams\n", packets);
	return 0;
}
