/*
 * cache/owner.c: the processes sharing a cache directory: owner ids, lock
 * files, liveness, reaping of dead owners.  Calls index-db.c; called by
 * index.c (and tests).
 */
#ifndef CKPTFS_CACHE_OWNER_H
#define CKPTFS_CACHE_OWNER_H

#include <stdbool.h>

#include "cache/index-types.h"

/* Picks a fresh owner id and creates and locks owners/<id>.lock. */
int cidx_owner_lock(cidx *x, char **err);
/* Reaps dead owners and removes the doomed entries nobody pins.  Write
 * lock held. */
int cidx_reap_locked(cidx *x);
/* Records this owner, reaps the dead ones and sweeps orphaned files, in
 * one transaction. */
int cidx_register_owner(cidx *x, char **err);
/* An orderly exit is a death without the wait: our pins go, our fills
 * become orphans, and doomed entries only we pinned are removed. */
void cidx_deregister(cidx *x);

/* Reaps dead owners (pins, orphaned fills, lock files). */
int cidx_reap(cidx *x);

/* Liveness of another owner id (exposed for tests). */
bool cidx_owner_alive(const cidx *x, const char *owner);

#endif
