// uring_echo: the reference C liburing echo server of ../../shared/docs/BASELINE.md,
// rebuilt here so ringpoll's io_uring engines can be compared with it on the
// same machine. One thread, one ring (SINGLE_ISSUER|DEFER_TASKRUN), multishot
// accept, multishot recv into a 4096 x 4 KiB provided-buffer ring, and the echo
// sent straight from the provided buffer, which goes back to the ring when the
// send completes. Ping-pong only: it assumes one send per buffer is enough
// (loopback TCP with small messages), and closes a connection on any error.
//
//   cc -O2 -o uring_echo uring_echo.c -luring && ./uring_echo PORT
//
// SIGTERM or SIGINT ends it.
#include <liburing.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

enum { NBUF = 4096, BUFSZ = 4096, BGID = 0 };
enum { K_ACCEPT = 1, K_RECV = 2, K_SEND = 3 };

static volatile sig_atomic_t stop;
static void on_signal(int s) { (void)s; stop = 1; }

static unsigned long long ud(int kind, int fd, int bid) {
	return (unsigned long long)kind << 56 | (unsigned long long)(unsigned)bid << 32 | (unsigned)fd;
}

static struct io_uring_sqe *sqe_get(struct io_uring *r) {
	struct io_uring_sqe *s = io_uring_get_sqe(r);
	if (!s) {
		io_uring_submit(r);
		s = io_uring_get_sqe(r);
	}
	return s;
}

static void arm_recv(struct io_uring *r, int fd) {
	struct io_uring_sqe *s = sqe_get(r);
	io_uring_prep_recv_multishot(s, fd, NULL, 0, 0);
	s->flags |= IOSQE_BUFFER_SELECT;
	s->buf_group = BGID;
	s->user_data = ud(K_RECV, fd, 0);
}

int main(int argc, char **argv) {
	if (argc != 2) {
		fprintf(stderr, "usage: uring_echo PORT\n");
		return 2;
	}
	signal(SIGTERM, on_signal);
	signal(SIGINT, on_signal);
	int lfd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(atoi(argv[1])), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	if (bind(lfd, (struct sockaddr *)&sa, sizeof sa) || listen(lfd, 1024)) {
		perror("listen");
		return 1;
	}
	struct io_uring ring;
	struct io_uring_params p = {.flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_CQSIZE, .cq_entries = 8192};
	int err = io_uring_queue_init_params(512, &ring, &p);
	if (err) {
		fprintf(stderr, "io_uring_queue_init: %s\n", strerror(-err));
		return 1;
	}
	char *arena = aligned_alloc(4096, (size_t)NBUF * BUFSZ);
	struct io_uring_buf_ring *br = aligned_alloc(4096, NBUF * sizeof(struct io_uring_buf));
	struct io_uring_buf_reg reg = {.ring_addr = (unsigned long)br, .ring_entries = NBUF, .bgid = BGID};
	if ((err = io_uring_register_buf_ring(&ring, &reg, 0))) {
		fprintf(stderr, "register_buf_ring: %s\n", strerror(-err));
		return 1;
	}
	io_uring_buf_ring_init(br);
	for (int i = 0; i < NBUF; i++)
		io_uring_buf_ring_add(br, arena + (size_t)i * BUFSZ, BUFSZ, i, io_uring_buf_ring_mask(NBUF), i);
	io_uring_buf_ring_advance(br, NBUF);
	struct io_uring_sqe *s = sqe_get(&ring);
	io_uring_prep_multishot_accept(s, lfd, NULL, NULL, 0);
	s->user_data = ud(K_ACCEPT, lfd, 0);
	fprintf(stderr, "uring_echo listening on 127.0.0.1:%s\n", argv[1]);
	while (!stop) {
		struct io_uring_cqe *cqe;
		if (io_uring_submit_and_wait(&ring, 1) < 0 && !stop)
			continue;
		unsigned head, n = 0;
		io_uring_for_each_cqe(&ring, head, cqe) {
			n++;
			unsigned long long u = cqe->user_data;
			int kind = u >> 56, fd = (int)(u & 0xffffffff), res = cqe->res;
			if (kind == K_ACCEPT) {
				if (res >= 0) {
					setsockopt(res, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
					arm_recv(&ring, res);
				}
				if (!(cqe->flags & IORING_CQE_F_MORE)) {
					s = sqe_get(&ring);
					io_uring_prep_multishot_accept(s, lfd, NULL, NULL, 0);
					s->user_data = ud(K_ACCEPT, lfd, 0);
				}
			} else if (kind == K_RECV) {
				if (res > 0 && (cqe->flags & IORING_CQE_F_BUFFER)) {
					int bid = cqe->flags >> IORING_CQE_BUFFER_SHIFT;
					s = sqe_get(&ring);
					io_uring_prep_send(s, fd, arena + (size_t)bid * BUFSZ, res, MSG_NOSIGNAL);
					s->user_data = ud(K_SEND, fd, bid);
					if (!(cqe->flags & IORING_CQE_F_MORE))
						arm_recv(&ring, fd);
				} else if (res == -ENOBUFS) {
					arm_recv(&ring, fd);
				} else if (!(cqe->flags & IORING_CQE_F_MORE)) {
					close(fd); // EOF or error
				}
			} else if (kind == K_SEND) {
				int bid = (int)((u >> 32) & 0xffffff);
				io_uring_buf_ring_add(br, arena + (size_t)bid * BUFSZ, BUFSZ, bid, io_uring_buf_ring_mask(NBUF), 0);
				io_uring_buf_ring_advance(br, 1);
			}
		}
		io_uring_cq_advance(&ring, n);
	}
	io_uring_queue_exit(&ring);
	return 0;
}
