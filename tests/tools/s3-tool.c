#include <stdio.h>

int main(void)
{
	fprintf(stderr, "s3-tool: not implemented yet\n");
	return 2;
}
