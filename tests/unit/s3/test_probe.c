/*
 * Unit tests for s3/probe: the -o listing= values.  The probes themselves
 * talk to a server: tests/integration/test_portability.py runs them
 * against Ceph RGW (complete listings) and s3rver (the defect), with a
 * refused probe write and a killed probe's leftover.
 */
#include <criterion/criterion.h>

#include "s3/probe.h"

Test(probe, listing_modes)
{
	s3_listing_mode m = S3_LISTING_FLAT;
	cr_assert_eq(s3_parse_listing_mode("auto", &m), 0);
	cr_assert_eq(m, S3_LISTING_AUTO);
	cr_assert_eq(s3_parse_listing_mode("delimiter", &m), 0);
	cr_assert_eq(m, S3_LISTING_DELIMITER);
	cr_assert_eq(s3_parse_listing_mode("flat", &m), 0);
	cr_assert_eq(m, S3_LISTING_FLAT);
	cr_assert_eq(s3_parse_listing_mode("Flat", &m), -1);
	cr_assert_eq(s3_parse_listing_mode("", &m), -1);
	cr_assert_eq(m, S3_LISTING_FLAT, "a bad value leaves the mode alone");
}
