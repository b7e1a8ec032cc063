/* libFuzzer target of unwinding against a fuzzed object: fuzz_unwind.c with the object in the
 * input (u32 length, the ELF file, then the sample), so its .eh_frame, .debug_* sections,
 * symbol tables and headers are fuzzed along with the registers and the stack. */
#define OBJECT_IN_INPUT 1
#include "fuzz_unwind.c"
