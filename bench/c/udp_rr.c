// udp_rr: ringbench's DNS-like load from C, without a language runtime
// of its own between the sockets and the clock. CLIENTS sockets, each
// connected to the server, each sending a request of SIZE bytes and
// awaiting its echo before the next; together they offer RATE requests a
// second, client i sending at start + i*interval/CLIENTS + n*interval
// (interval = CLIENTS/RATE), or at once when its reply came after its slot
// (a client behind by more than two intervals skips the slots it missed,
// as ringload -proto udp-rr does). One thread, non-blocking sockets, one
// epoll set, sleeping in epoll_pwait2 until the next send is due or a
// reply comes (with a timer slack of 1 µs). A request unanswered after 200 ms counts as lost, and the
// client goes on; a reply that is not the request's bytes is an error.
//
// It measures from each send to its reply's arrival over DURATION_MS after
// WARMUP_MS, and prints one JSON object with ringload -proto udp-rr's
// fields (conns, size, offered_rate, requests, window_s, req_per_s,
// p50_us, p99_us, p999_us, max_us, lost, errors). With -l FILE it also
// writes every measured request to FILE, one line each: client, send time
// (CLOCK_REALTIME ns), latency (ns), as ringload -latency-log does.
//
//   cc -O2 -o udp_rr udp_rr.c && ./udp_rr [-l FILE] HOST PORT CLIENTS RATE SIZE WARMUP_MS DURATION_MS
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum { MAX_CLIENTS = 10000, MAX_SIZE = 65507, LOST_NS = 200000000 };

struct client {
	int fd;
	uint64_t seq;     // of the request in flight
	int64_t sent;     // its send time (monotonic ns), 0 when none is in flight
	int64_t sent_wall; // the same, CLOCK_REALTIME, for the log
	int64_t next;     // the next slot (monotonic ns)
};

struct sample {
	int32_t client;
	int64_t sent_wall;
	int64_t took;
};

static int64_t now_ns(clockid_t c) {
	struct timespec ts;
	clock_gettime(c, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int cmp64(const void *a, const void *b) {
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return (x > y) - (x < y);
}

static volatile sig_atomic_t stop;
static void on_stop(int s) { (void)s; stop = 1; }

int main(int argc, char **argv) {
	const char *logpath = NULL;
	int a = 1;
	if (a + 1 < argc && strcmp(argv[a], "-l") == 0) {
		logpath = argv[a + 1];
		a += 2;
	}
	if (argc - a != 7) {
		fprintf(stderr, "usage: udp_rr [-l FILE] HOST PORT CLIENTS RATE SIZE WARMUP_MS DURATION_MS\n");
		return 2;
	}
	const char *host = argv[a];
	int port = atoi(argv[a + 1]), clients = atoi(argv[a + 2]);
	double rate = atof(argv[a + 3]);
	int size = atoi(argv[a + 4]);
	int64_t warmup = (int64_t)atol(argv[a + 5]) * 1000000, duration = (int64_t)atol(argv[a + 6]) * 1000000;
	struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons(port)};
	if (port <= 0 || port > 65535 || inet_pton(AF_INET, host, &to.sin_addr) != 1) {
		fprintf(stderr, "udp_rr: %s:%s: want an IPv4 address and a port\n", host, argv[a + 1]);
		return 2;
	}
	if (clients < 1 || clients > MAX_CLIENTS || rate <= 0 || size < 16 || size > MAX_SIZE || warmup < 0 || duration <= 0) {
		fprintf(stderr, "udp_rr: want 1 to %d clients, a rate above 0, 16 to %d bytes, a warm-up of 0 ms or more and a duration above 0\n", MAX_CLIENTS, MAX_SIZE);
		return 2;
	}
	struct sigaction sa = {0};
	sa.sa_handler = on_stop;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);

	// Wake for a send when it is due, not up to 50 µs later (the default
	// timer slack), which would bunch the clients' requests.
	prctl(PR_SET_TIMERSLACK, 1000UL);
	int ep = epoll_create1(EPOLL_CLOEXEC);
	if (ep < 0) {
		perror("udp_rr: epoll_create1");
		return 1;
	}
	struct client *cs = calloc(clients, sizeof *cs);
	int64_t interval = (int64_t)(clients / rate * 1e9);
	int64_t start = now_ns(CLOCK_MONOTONIC);
	for (int i = 0; i < clients; i++) {
		int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (fd < 0 || connect(fd, (struct sockaddr *)&to, sizeof to) != 0) {
			perror("udp_rr: socket");
			return 1;
		}
		struct epoll_event ev = {.events = EPOLLIN, .data.u32 = i};
		if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) != 0) {
			perror("udp_rr: epoll_ctl");
			return 1;
		}
		cs[i] = (struct client){.fd = fd, .next = start + interval * i / clients};
	}
	int64_t begin = start + warmup, end = begin + duration;
	size_t cap = (size_t)(rate * (duration / 1e9) * 1.25) + 1024, n = 0;
	struct sample *samples = malloc(cap * sizeof *samples);
	unsigned char *req = calloc(1, size), *buf = malloc(MAX_SIZE + 1);
	unsigned long long lost = 0, errors = 0, sends = 0;
	struct epoll_event evs[256];
	for (;;) {
		int64_t now = now_ns(CLOCK_MONOTONIC);
		if (stop || now >= end)
			break;
		// Send what is due; find when the next send or loss is.
		int64_t wake = end;
		for (int i = 0; i < clients; i++) {
			struct client *c = &cs[i];
			if (c->sent != 0 && now - c->sent >= LOST_NS) {
				if (c->sent >= begin)
					lost++;
				c->sent = 0;
			}
			if (c->sent != 0) {
				if (c->sent + LOST_NS < wake)
					wake = c->sent + LOST_NS;
				continue;
			}
			if (c->next > now) {
				if (c->next < wake)
					wake = c->next;
				continue;
			}
			if (now - c->next > 2 * interval)
				c->next = now; // far behind: skip the missed slots
			c->next += interval;
			c->seq++;
			memcpy(req, &i, sizeof i);
			memcpy(req + 8, &c->seq, sizeof c->seq);
			c->sent = now_ns(CLOCK_MONOTONIC);
			c->sent_wall = logpath ? now_ns(CLOCK_REALTIME) : 0;
			if (send(c->fd, req, size, 0) != size) {
				errors++;
				c->sent = 0;
				continue;
			}
			sends++;
			if (c->sent + LOST_NS < wake)
				wake = c->sent + LOST_NS;
		}
		now = now_ns(CLOCK_MONOTONIC);
		int64_t d = wake > now ? wake - now : 0;
		struct timespec ts = {.tv_sec = d / 1000000000, .tv_nsec = d % 1000000000};
		int k = epoll_pwait2(ep, evs, 256, &ts, NULL);
		if (k < 0 && errno != EINTR) {
			perror("udp_rr: epoll_pwait2");
			return 1;
		}
		for (int e = 0; e < k; e++) {
			struct client *c = &cs[evs[e].data.u32];
			for (;;) {
				ssize_t r = recv(c->fd, buf, MAX_SIZE + 1, 0);
				if (r < 0)
					break; // EAGAIN, or an ICMP error: the request counts as lost
				int64_t got = now_ns(CLOCK_MONOTONIC);
				uint64_t seq;
				memcpy(&seq, buf + 8, sizeof seq);
				if (c->sent == 0 || (r == size && seq < c->seq))
					continue; // a reply that came after its request was counted lost
				memcpy(req + 8, &c->seq, sizeof c->seq);
				int32_t id = (int32_t)evs[e].data.u32;
				memcpy(req, &id, sizeof id);
				if (r != size || memcmp(buf, req, size) != 0) {
					errors++;
					c->sent = 0;
					continue;
				}
				if (c->sent >= begin && n < cap)
					samples[n++] = (struct sample){.client = id, .sent_wall = c->sent_wall, .took = got - c->sent};
				c->sent = 0;
			}
		}
	}
	double window = (double)duration / 1e9;
	int64_t *lat = malloc((n ? n : 1) * sizeof *lat);
	for (size_t i = 0; i < n; i++)
		lat[i] = samples[i].took;
	qsort(lat, n, sizeof *lat, cmp64);
#define Q(p) (n ? lat[(size_t)((p) * n) < n ? (size_t)((p) * n) : n - 1] / 1e3 : 0.0)
	printf("{\"conns\":%d,\"size\":%d,\"offered_rate\":%g,\"requests\":%zu,\"window_s\":%g,\"req_per_s\":%g,"
	       "\"p50_us\":%g,\"p99_us\":%g,\"p999_us\":%g,\"max_us\":%g,\"lost\":%llu,\"errors\":%llu}\n",
	       clients, size, rate, n, window, n / window, Q(0.5), Q(0.99), Q(0.999), n ? lat[n - 1] / 1e3 : 0.0, lost, errors);
	if (logpath) {
		FILE *f = fopen(logpath, "w");
		if (!f) {
			perror("udp_rr: -l");
			return 1;
		}
		for (size_t i = 0; i < n; i++)
			fprintf(f, "%d %lld %lld\n", samples[i].client, (long long)samples[i].sent_wall, (long long)samples[i].took);
		if (fclose(f) != 0) {
			perror("udp_rr: -l");
			return 1;
		}
	}
	return errors ? 1 : 0;
}
