#include <criterion/criterion.h>
Test(stub, stub) { cr_assert(1); }
