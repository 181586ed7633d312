/*
 * s3upload: S3 write primitives (work in progress).
 */
#ifndef CKPTFS_S3_UPLOAD_H
#define CKPTFS_S3_UPLOAD_H

#include <stdint.h>

uint64_t s3_part_size(uint64_t object_size, uint64_t min_part);

#endif
