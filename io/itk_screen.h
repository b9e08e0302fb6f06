/*
 * itk_screen.h -- the header screens of the ITK module (C++ inside, not installed): what a
 * NRRD (itk_screen.cxx) or MetaImage (itk_screen_meta.cxx) header claims is checked before
 * teem or MetaIO parse it or allocate for it, each screen against a crash or hang that
 * fuzz_itk_headers found in them. itk_io.cxx runs them inside its guarded ITK calls.
 */
#ifndef SWI_ITK_SCREEN_H
#define SWI_ITK_SCREEN_H

#include "io_internal.h"

#include <cstdint>
#include <string>
#include <vector>

namespace itk {
class MetaImageIO;
}

/* A numbered series' file name pattern: at most one %[0-9]*d or %[0-9]*i of width at most
 * 11, and %% for a percent sign. */
bool io__itk_file_pattern_ok(const std::string &v);
/* The first `max` bytes of a file into head; false (errno set) when it cannot be opened. */
bool io__itk_read_head(const char *path, size_t max, std::string &head);
/* The line of head that starts at `at` (without its newline); `at` moves past it. */
std::string io__itk_next_line(const std::string &head, size_t &at);
/* A header value's words, split at blanks as MetaIO's MET_StringToWordArray does. */
std::vector<std::string> io__itk_split_words(const std::string &v);

/* A NRRD header's data file fields, before teem parses them. */
swi_status io__itk_check_nrrd_header(const char *path, char *err, size_t n);
/* The bytes (count values) a NRRD header claims, against the data they would be read from. */
swi_status io__itk_check_nrrd_data(const char *path, uint64_t bytes, uint64_t count, char *err, size_t n);
/* A MetaImage header's fields and their order, before MetaIO parses it. */
swi_status io__itk_check_meta_header(const char *path, char *err, size_t n);
/* The voxel data a MetaImage header (read by mio) claims: bytes of them; inflate_all: a
 * compressed stream is read through. */
swi_status io__itk_check_meta_data(itk::MetaImageIO *mio, const char *path, uint64_t bytes, bool inflate_all,
                                   char *err, size_t n);

#endif
