/*
 * daemon notify: tells a service manager how the mount is doing, over
 * systemd's notification protocol (sd_notify(3): datagrams of
 * "VAR=value" lines to the socket named by $NOTIFY_SOCKET, "@name" for an
 * abstract socket).  With a unit of Type=notify, `After=` ordering then
 * waits for a mount that answers.
 *
 *   READY=1      once the FUSE session answers: a thread stats the mount
 *                point (the kernel's FUSE_INIT and a GETATTR of the root,
 *                served by this process) and sees the FUSE file system;
 *   STATUS=...   with READY=1 and then every NOTIFY_STATUS_INTERVAL
 *                seconds when it changed: pending transactions and the
 *                bytes they have left to upload;
 *   STOPPING=1   when the unmount begins draining what is pending, with
 *                STATUS= lines of its progress until notify_free.
 *
 * Nothing is sent (and no thread runs) without $NOTIFY_SOCKET; a build
 * without libsystemd logs once that it cannot notify.
 */
#ifndef CKPTFS_DAEMON_NOTIFY_H
#define CKPTFS_DAEMON_NOTIFY_H

#include "commit/engine.h"

#define NOTIFY_STATUS_INTERVAL 2.0

typedef struct notifier notifier;

/* Starts the readiness probe of mountpoint and the status refresh (e:
 * the commit engine, NULL for a read-only mount).  NULL when there is no
 * $NOTIFY_SOCKET (or no memory: notifications are best effort). */
notifier *notify_start(const char *mountpoint, eng *e);
/* STOPPING=1: the FUSE session ended and pending commits drain now. */
void notify_stopping(notifier *n);
/* Stops the thread (before the engine closes) and frees n (NULL: no-op). */
void notify_free(notifier *n);

/* The STATUS= text for these transactions (pure; for the unit tests):
 * "serving; 2 pending transactions, 10.0 MiB to upload" and the like,
 * prefixed "unmounting: " while stopping.  Writes into out. */
void notify_status_text(const eng_txn_status *v, size_t n, bool writable,
			bool stopping, char *out, size_t outsz);

#endif
