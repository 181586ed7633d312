/*
 * fuse-floor: the least a FUSE filesystem can cost per file on this
 * machine.  It serves 400 files of 256 KiB from memory, does no work in
 * any handler, keeps the kernel's page cache across opens
 * (FOPEN_KEEP_CACHE) and sends no FLUSH (FOPEN_NOFLUSH), so a hot `cat`
 * of its files measures only the OPEN and RELEASE round trips that every
 * FUSE filesystem pays and a local file does not.  bench/README.md,
 * "Restore benchmark", compares ckptfs's hot reads of small files to it.
 *
 *     gcc -O2 -Wall -Wextra -Werror -o fuse-floor bench/fuse-floor.c \
 *         $(pkg-config --cflags --libs fuse3)
 *     ./fuse-floor /mnt/floor &    # fusermount3 -u /mnt/floor to stop
 */
#define FUSE_USE_VERSION 34
#include <errno.h>
#include <fuse_lowlevel.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define NFILES 400
#define FSIZE (256 * 1024)

static char *data;

static void stat_of(fuse_ino_t ino, struct stat *st)
{
	memset(st, 0, sizeof *st);
	st->st_ino = ino;
	if (ino == FUSE_ROOT_ID) {
		st->st_mode = S_IFDIR | 0755;
		st->st_nlink = 2;
	} else {
		st->st_mode = S_IFREG | 0644;
		st->st_nlink = 1;
		st->st_size = FSIZE;
		st->st_blksize = 128 * 1024; /* as ckptfs for small files */
	}
}

static void ff_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	int i;
	char tail;
	if (parent != FUSE_ROOT_ID ||
	    sscanf(name, "f%05d%c", &i, &tail) != 1 || i < 0 || i >= NFILES) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	struct fuse_entry_param e = {0};
	e.ino = 2 + (fuse_ino_t)i;
	e.attr_timeout = e.entry_timeout = 3600;
	stat_of(e.ino, &e.attr);
	fuse_reply_entry(req, &e);
}

static void ff_getattr(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	(void)fi;
	struct stat st;
	stat_of(ino, &st);
	fuse_reply_attr(req, &st, 3600);
}

static void ff_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	fi->keep_cache = 1;
	fi->noflush = 1;
	fuse_reply_open(req, fi);
}

static void ff_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	(void)ino;
	(void)fi;
	if (off >= FSIZE) {
		fuse_reply_buf(req, NULL, 0);
		return;
	}
	if (off + (off_t)size > FSIZE)
		size = (size_t)(FSIZE - off);
	fuse_reply_buf(req, data + off, size);
}

static void ff_release(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	(void)ino;
	(void)fi;
	fuse_reply_err(req, 0);
}

static void ff_readdir(fuse_req_t req, fuse_ino_t ino, size_t size,
		       off_t off, struct fuse_file_info *fi)
{
	(void)ino;
	(void)fi;
	char *b = calloc(1, size);
	size_t used = 0;
	for (int i = (int)off; b && i < NFILES; i++) {
		char name[16];
		struct stat st;
		snprintf(name, sizeof name, "f%05d", i);
		stat_of(2 + (fuse_ino_t)i, &st);
		size_t n = fuse_add_direntry(req, b + used, size - used, name,
					     &st, i + 1);
		if (n > size - used)
			break;
		used += n;
	}
	if (b)
		fuse_reply_buf(req, b, used);
	else
		fuse_reply_err(req, ENOMEM);
	free(b);
}

static const struct fuse_lowlevel_ops ops = {
	.lookup = ff_lookup,
	.getattr = ff_getattr,
	.open = ff_open,
	.read = ff_read,
	.release = ff_release,
	.readdir = ff_readdir,
};

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: fuse-floor MOUNTPOINT\n");
		return 2;
	}
	data = malloc(FSIZE);
	if (!data)
		return 1;
	memset(data, 'x', FSIZE);
	char *fargv[] = {argv[0], NULL};
	struct fuse_args args = FUSE_ARGS_INIT(1, fargv);
	struct fuse_session *se = fuse_session_new(&args, &ops, sizeof ops, NULL);
	if (!se || fuse_session_mount(se, argv[1]) != 0) {
		fprintf(stderr, "fuse-floor: cannot mount %s\n", argv[1]);
		return 1;
	}
	struct fuse_loop_config cfg = {.clone_fd = 0, .max_idle_threads = 10};
	int rc = fuse_session_loop_mt(se, &cfg);
	fuse_session_unmount(se);
	fuse_session_destroy(se);
	free(data);
	return rc ? 1 : 0;
}
