/* A dynamically linked program without libc (built -nostdlib with an interpreter, see the
 * Makefile's inject section): ld.so is its only library, so there is no dlopen to call and
 * the injector must refuse it. Prints "ready 0", reads one byte from stdin, exits 0 if it got
 * it. */
void _start(void)
{
	static const char ready[] = "ready 0\n";
	char c;
	long r;
	__asm__ volatile("syscall" : "=a"(r) : "0"(1L), "D"(1L), "S"(ready), "d"(sizeof(ready) - 1)
	                 : "rcx", "r11", "memory");
	__asm__ volatile("syscall" : "=a"(r) : "0"(0L), "D"(0L), "S"(&c), "d"(1L)
	                 : "rcx", "r11", "memory");
	__asm__ volatile("syscall" : : "a"(60L), "D"(r == 1 ? 0L : 1L) : "rcx", "r11", "memory");
	for (;;) {}
}
