#include "s3/upload.h"

uint64_t s3_part_size(uint64_t object_size, uint64_t min_part)
{
	(void)object_size;
	return min_part;
}
