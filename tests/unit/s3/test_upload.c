#include <criterion/criterion.h>

#include "s3/upload.h"

Test(part_size, placeholder)
{
	cr_assert_eq(s3_part_size(0, 8u << 20), 8u << 20);
}
