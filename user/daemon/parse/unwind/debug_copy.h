/* Separate debug files whose DWARF sections are compressed (Debian's dbgsym packages, dh_strip
 * --compress-debug-sections): libdw decompresses them into its own heap, once per Dwfl, so every
 * traced process that maps libc held its own ~10 MB copy of libc's debug info. Instead, each
 * such file is decompressed once into an anonymous file (memfd) that every process's libdw
 * maps: its pages are shared, and counted once. */
#ifndef MEMTRACED_UNWIND_DEBUG_COPY_H
#define MEMTRACED_UNWIND_DEBUG_COPY_H

/* fd: a debug file just opened for libdw. Returns an fd to hand libdw instead: the shared
 * uncompressed copy (fd is closed then), or fd itself when it has no compressed section, is
 * not ELF, or the copy cannot be made. Thread-safe. */
int debug_copy_uncompressed(int fd);

#endif
