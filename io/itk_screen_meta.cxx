/* itk_screen_meta.cxx -- a MetaImage header screened before MetaIO parses it (field order,
 * printable lines, array sizes) and its voxel data checked before MetaIO reads them: a
 * local, separate, numbered or listed data file that holds what the header claims. */
#include "itk_screen.h"

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sys/stat.h>
#include <unistd.h>

#include <itkMetaImageIO.h>
#include <metaImage.h>
#include <zlib.h>

/* MetaIO loops over array fields (TransformMatrix, DimSize, ...) by the NDims it has read
 * so far, uninitialised when none came first, and reads a header without an
 * ElementDataFile line to the end of the file: hostile headers hang it. Before MetaIO
 * sees a header, NDims (1..16) must come before every other field, DimSize and ElementType
 * before ElementDataFile, which must end the header, every line must be printable text,
 * and no field may hold more numbers than NDims x NDims (heap corruption and reads past
 * MetaIO's buffers were found by fuzz_itk_headers beyond these). */
swi_status io__itk_check_meta_header(const char *path, char *err, size_t n) {
    std::string head;
    if (!io__itk_read_head(path, 1 << 16, head)) {
        io__err(err, n, "%s: cannot open: %s", path, strerror(errno));
        return SWI_ERR_IO;
    }
    int ndims = 0;
    bool dimsize = false, elemtype = false;
    for (size_t at = 0; at < head.size();) {
        std::string line = io__itk_next_line(head, at);
        for (unsigned char ch : line)
            if ((ch < 0x20 && ch != '\t' && ch != '\r') || ch > 0x7e) {
                io__err(err, n, "%s: corrupt MetaImage header: a line holds binary data", path);
                return SWI_ERR_INVALID_ARG;
            }
        if (line.size() > 4000) {
            io__err(err, n, "%s: corrupt MetaImage header: a line of %zu characters", path, line.size());
            return SWI_ERR_INVALID_ARG;
        }
        size_t eq = line.find('=');
        if (eq == std::string::npos) continue;
        std::string key = line.substr(0, eq);
        static const char *const arrays[] = {
            "TransformMatrix", "Rotation",         "Orientation",    "Offset",      "Position",
            "Origin",          "CenterOfRotation", "ElementSpacing", "ElementSize", "DimSize"};
        bool numeric = false;
        for (const char *a : arrays) numeric = numeric || key.find(a) != std::string::npos;
        if (ndims && numeric) {
            size_t words = 0;
            for (size_t i = eq + 1; i < line.size(); i++)
                words += line[i] != ' ' && line[i] != '\t' &&
                         (i == eq + 1 || line[i - 1] == ' ' || line[i - 1] == '\t');
            if (words > (size_t)(ndims * ndims)) {
                io__err(err, n, "%s: corrupt MetaImage header: %zu values in one field", path, words);
                return SWI_ERR_INVALID_ARG;
            }
        }
        while (!key.empty() && (key.back() == ' ' || key.back() == '\t')) key.pop_back();
        while (!key.empty() && (key[0] == ' ' || key[0] == '\t')) key.erase(0, 1);
        if (key == "NDims") {
            char *end = NULL;
            long v = strtol(line.c_str() + eq + 1, &end, 10);
            while (end && (*end == ' ' || *end == '\r' || *end == '\t')) end++;
            if (v < 1 || v > 16 || !end || *end) {
                io__err(err, n, "%s: corrupt MetaImage header: NDims must be 1..16", path);
                return SWI_ERR_INVALID_ARG;
            }
            ndims = (int)v;
        } else if (key == "ElementDataFile") {
            if (!ndims) break;
            if (!dimsize || !elemtype) { /* MetaIO reads past its buffers without them */
                io__err(err, n, "%s: corrupt MetaImage header: no %s before ElementDataFile", path,
                        !dimsize ? "DimSize" : "ElementType");
                return SWI_ERR_INVALID_ARG;
            }
            if (!io__itk_file_pattern_ok(line.substr(eq + 1))) {
                io__err(err, n,
                        "%s: MetaImage ElementDataFile may hold one %%d (a numbered file series) and "
                        "no other %% conversion",
                        path);
                return SWI_ERR_INVALID_ARG;
            }
            return SWI_OK;
        } else if (key == "DimSize" && ndims) {
            dimsize = true;
        } else if (key == "ElementType" && ndims) {
            elemtype = true;
        } else if (!ndims && key != "ObjectType" && key != "Comment" && key != "ObjectSubType" &&
                   key != "FormTypeName" && key != "Name") {
            io__err(err, n, "%s: MetaImage header field %.40s comes before NDims", path, key.c_str());
            return SWI_ERR_INVALID_ARG;
        }
    }
    io__err(err, n, "%s: corrupt MetaImage header: %s", path,
            ndims ? "no ElementDataFile line in its first 64 KB" : "no NDims line");
    return SWI_ERR_INVALID_ARG;
}

/* Where a MetaImage's voxel data start in its own file: after the ElementDataFile line. */
static int64_t local_data_offset(const char *path) {
    std::string head;
    if (!io__itk_read_head(path, 1 << 20, head)) return -1;
    for (size_t at = 0; (at = head.find("ElementDataFile", at)) != std::string::npos; at++) {
        if (at > 0 && head[at - 1] != '\n') continue;
        size_t eol = head.find('\n', at);
        return eol == std::string::npos ? -1 : (int64_t)eol + 1;
    }
    return -1;
}

/* Whether a file holds at least `need` bytes (any size when compressed); else a message. */
static bool slice_file_ok(const std::string &file, uint64_t need, bool compressed, const char *path,
                          const char *what, char *err, size_t n) {
    struct stat st;
    if (file.size() >= 2000 || stat(file.c_str(), &st) != 0) {
        io__err(err, n, "%s: %s: the file %.2000s is missing", path, what, file.c_str());
        return false;
    }
    if (!S_ISREG(st.st_mode)) { /* MetaIO would block on a FIFO, read nothing from a folder */
        io__err(err, n, "%s: %s: %s is %s, not a regular file", path, what, file.c_str(),
                swi_io_file_kind((unsigned)st.st_mode));
        return false;
    }
    if (!compressed && (uint64_t)st.st_size < need) {
        io__err(err, n, "%s: %s: %s holds %lld bytes, and its slice needs %llu", path, what, file.c_str(),
                (long long)st.st_size, (unsigned long long)need);
        return false;
    }
    return true;
}

/* A numbered series' ElementDataFile is "NAME [FIRST [LAST [STEP]]]": MetaIO reads files
 * FIRST, FIRST+STEP, ... up to LAST, at most one per slice, STEP taken as (LAST-FIRST)/slices
 * when it is not given. It divides by STEP (a zero STEP raised SIGFPE: found by
 * fuzz_itk_headers), loops forever on a negative one, and reads a missing or short file as
 * zeros: so STEP must be at least 1, the files must be one per slice, and each must exist and
 * hold its slice. */
static swi_status check_meta_series(MetaImage *mi, const std::string &dir, const char *path, uint64_t bytes,
                                    char *err, size_t n) {
    std::string spec = mi->ElementDataFileName();
    std::vector<std::string> words = io__itk_split_words(spec);
    int nd = mi->NDims();
    int64_t slices = nd >= 1 ? mi->DimSize()[nd - 1] : 0;
    int64_t num[3] = {0, 0, 0};
    bool ok = words.size() >= 1 && words.size() <= 4 && slices >= 1 && words[0].size() <= 1000;
    for (size_t w = 1; ok && w < words.size(); w++) {
        const std::string &t = words[w];
        size_t d = t[0] == '-' ? 1 : 0;
        ok = t.size() > d && t.size() - d <= 9 && t.find_first_not_of("0123456789", d) == std::string::npos;
        if (ok) num[w - 1] = std::stoll(t);
    }
    if (!ok) {
        io__err(err, n,
                "%s: a numbered MetaImage series needs ElementDataFile = NAME [FIRST [LAST [STEP]]], a name "
                "without spaces and whole numbers (it has \"%.80s\")",
                path, spec.c_str());
        return SWI_ERR_INVALID_ARG;
    }
    int64_t first = words.size() >= 2 ? num[0] : 1, last = first + slices - 1, step = 1;
    if (words.size() >= 3) {
        last = num[1];
        step = (last - first) / slices;
    }
    if (words.size() >= 4) step = num[2];
    if (step < 1) {
        io__err(err, n, "%s: numbered MetaImage series %.80s: its step is %lld, and must be at least 1", path,
                spec.c_str(), (long long)step);
        return SWI_ERR_INVALID_ARG;
    }
    int64_t files = last < first ? 0 : (last - first) / step + 1;
    if (files < slices) {
        io__err(err, n, "%s: numbered MetaImage series %.80s names %lld files for %lld slices", path,
                spec.c_str(), (long long)files, (long long)slices);
        return SWI_ERR_INVALID_ARG;
    }
    /* the one conversion is %[0][width]d or i (io__itk_check_meta_header screened the name) */
    const std::string &name = words[0];
    uint64_t slice_bytes = bytes / (uint64_t)slices;
    for (int64_t k = 0; k < slices; k++) { /* MetaIO reads the first `slices` of them */
        std::string file;
        for (size_t i = 0; i < name.size(); i++) {
            if (name[i] != '%') {
                file += name[i];
            } else if (name[i + 1] == '%') {
                file += '%';
                i++;
            } else {
                size_t j = i + 1;
                bool zero = name[j] == '0';
                int width = 0;
                for (; name[j] >= '0' && name[j] <= '9'; j++) width = width * 10 + (name[j] - '0');
                char num_text[64];
                snprintf(num_text, sizeof num_text, zero ? "%0*lld" : "%*lld", width,
                         (long long)(first + k * step));
                file += num_text;
                i = j;
            }
        }
        if (file[0] != '/') file = dir + file;
        if (!slice_file_ok(file, slice_bytes, mi->CompressedData(), path, "numbered MetaImage series", err,
                           n))
            return SWI_ERR_INVALID_ARG;
    }
    return SWI_OK;
}

/* ElementDataFile = LIST [ND] names one file per line after it, each holding an N-D part
 * (N = NDims-1 unless given). MetaIO reads a missing file as zeros, indexes its arrays
 * with a negative N, reads before the line's buffer on an empty line, and skips a last line
 * without a newline: so N must be a small whole number, and the header must go on with one
 * nonempty line per part, each ending in a newline and naming a file that holds its part. */
static swi_status check_meta_list(MetaImage *mi, const std::string &dir, const char *path, uint64_t bytes,
                                  char *err, size_t n) {
    std::vector<std::string> words = io__itk_split_words(mi->ElementDataFileName());
    int nd = mi->NDims(), part_dims = nd - 1;
    if (words.size() > 2 ||
        (words.size() == 2 &&
         (words[1].size() > 3 || words[1].find_first_not_of("0123456789Dd") != std::string::npos ||
          words[1][0] < '0' || words[1][0] > '9'))) {
        io__err(err, n,
                "%s: MetaImage ElementDataFile = LIST takes at most the dimension of each file (LIST 2D)",
                path);
        return SWI_ERR_INVALID_ARG;
    }
    if (words.size() == 2) {
        int d = atoi(words[1].c_str());
        if (d >= 1 && d <= nd) part_dims = d;
    }
    int64_t parts = 1;
    for (int a = nd - 1; a >= part_dims && parts <= (1 << 20); a--) parts *= mi->DimSize()[a];
    if (parts > (1 << 20)) {
        io__err(err, n, "%s: MetaImage file LIST: more than %d files", path, 1 << 20);
        return SWI_ERR_INVALID_ARG;
    }
    int64_t at = local_data_offset(path);
    FILE *f = at < 0 ? NULL : fopen(path, "rb");
    if (!f || fseek(f, (long)at, SEEK_SET) != 0) {
        if (f) fclose(f);
        io__err(err, n, "%s: MetaImage file LIST: cannot read the list after its ElementDataFile line", path);
        return SWI_ERR_INVALID_ARG;
    }
    uint64_t part_bytes = bytes / (uint64_t)parts;
    char line[1024];
    for (int64_t k = 0; k < parts; k++) {
        if (!fgets(line, sizeof line, f)) {
            fclose(f);
            io__err(err, n, "%s: MetaImage file LIST names %lld files, and %lld are needed", path,
                    (long long)k, (long long)parts);
            return SWI_ERR_INVALID_ARG;
        }
        size_t len = strlen(line);
        bool whole = len > 0 && line[len - 1] == '\n';
        while (len > 0 && (isspace((unsigned char)line[len - 1]) || !isprint((unsigned char)line[len - 1])))
            line[--len] = '\0';
        if (!whole || len == 0) {
            fclose(f);
            io__err(err, n, "%s: MetaImage file LIST: line %lld of the list is %s", path, (long long)k + 1,
                    whole ? "empty" : "too long or lacks its newline");
            return SWI_ERR_INVALID_ARG;
        }
        std::string file(line);
        if (file[0] != '/') file = dir + file;
        if (!slice_file_ok(file, part_bytes, mi->CompressedData(), path, "MetaImage file LIST", err, n)) {
            fclose(f);
            return SWI_ERR_INVALID_ARG;
        }
    }
    fclose(f);
    return SWI_OK;
}

/* MetaIO reads short or corrupt data without an error (zeros for what is missing), so the
 * data are checked first: an uncompressed file must hold them all, a compressed stream
 * must inflate to at least their size (inflate: read it through; else, when the file is
 * opened and nothing is allocated yet, its size must allow that within deflate's largest
 * expansion). */
swi_status io__itk_check_meta_data(itk::MetaImageIO *mio, const char *path, uint64_t bytes, bool inflate_all,
                                   char *err, size_t n) {
    MetaImage *mi = mio->GetMetaImagePointer();
    std::string file = mi->ElementDataFileName() ? mi->ElementDataFileName() : "";
    std::string dir(path);
    size_t slash = dir.rfind('/');
    dir = slash == std::string::npos ? std::string() : dir.substr(0, slash + 1);
    int64_t offset;
    if (file == "LOCAL") {
        file = path;
        offset = local_data_offset(path);
    } else if (file.compare(0, 4, "LIST") == 0) { /* MetaIO's order: LOCAL, LIST, then a series */
        return check_meta_list(mi, dir, path, bytes, err, n);
    } else if (file.find('%') != std::string::npos) {
        return check_meta_series(mi, dir, path, bytes, err, n);
    } else if (file.empty() || mi->HeaderSize() < 0) {
        return SWI_OK;
    } else {
        if (file[0] != '/') file = dir + file;
        offset = mi->HeaderSize();
    }
    struct stat st;
    if (offset < 0 || stat(file.c_str(), &st) != 0) {
        io__err(err, n, "%s: cannot find its voxel data (ElementDataFile %s)", path,
                mi->ElementDataFileName());
        return SWI_ERR_INVALID_ARG;
    }
    /* a directory would leave MetaIO's buffer unread (uninitialised voxels), a FIFO block */
    if (!S_ISREG(st.st_mode)) {
        io__err(err, n, "%s: ElementDataFile %s is %s, not a regular file", path, file.c_str(),
                swi_io_file_kind((unsigned)st.st_mode));
        return SWI_ERR_INVALID_ARG;
    }
    if (!mi->CompressedData()) {
        if ((uint64_t)st.st_size < (uint64_t)offset + bytes) {
            io__err(err, n,
                    "%s: truncated: the header describes %llu bytes of voxels but %s "
                    "holds %lld after offset %lld",
                    path, (unsigned long long)bytes, file.c_str(), (long long)(st.st_size - offset),
                    (long long)offset);
            return SWI_ERR_INVALID_ARG;
        }
        return SWI_OK;
    }
    if (!inflate_all) {
        const uint64_t have = (uint64_t)st.st_size > (uint64_t)offset ? (uint64_t)(st.st_size - offset) : 0;
        if (have >= bytes / IO_DEFLATE_MAX_RATIO + 1) return SWI_OK;
        char b[32];
        io__err(err, n,
                "%s: the header claims %s of voxels, more than the %llu compressed bytes of %s can hold "
                "(deflate inflates at most %d:1)",
                path, swi_format_bytes((size_t)bytes, b, sizeof b), (unsigned long long)have, file.c_str(),
                IO_DEFLATE_MAX_RATIO);
        return SWI_ERR_INVALID_ARG;
    }
    int fd = swi_io_open_regular(file.c_str(), NULL, NULL, 0);
    FILE *f = fd >= 0 ? fdopen(fd, "rb") : NULL;
    if (!f || fseek(f, (long)offset, SEEK_SET) != 0) {
        int e = errno;
        if (f)
            fclose(f);
        else if (fd >= 0)
            close(fd);
        io__err(err, n, "%s: cannot read its voxel data: %s", path, strerror(e));
        return SWI_ERR_IO;
    }
    z_stream z;
    memset(&z, 0, sizeof z);
    if (inflateInit(&z) != Z_OK) {
        fclose(f);
        io__err(err, n, "%s: out of memory", path);
        return SWI_ERR_NOMEM;
    }
    std::vector<unsigned char> in(1 << 16), out(1 << 18);
    uint64_t produced = 0;
    int zr = Z_OK;
    bool read_failed = false; /* the system's failure, not a file that ends early */
    while (produced < bytes && zr == Z_OK) {
        if (z.avail_in == 0) {
            size_t got = fread(in.data(), 1, in.size(), f);
            if (got == 0) {
                read_failed = ferror(f) != 0;
                break;
            }
            z.next_in = in.data();
            z.avail_in = (uInt)got;
        }
        z.next_out = out.data();
        z.avail_out = (uInt)out.size();
        zr = inflate(&z, Z_NO_FLUSH);
        produced += out.size() - z.avail_out;
    }
    inflateEnd(&z);
    fclose(f);
    if (produced < bytes) {
        io__err(err, n,
                "%s: corrupt or truncated compressed voxel data (%s after %llu of %llu "
                "bytes)",
                path, zr == Z_DATA_ERROR ? "not zlib data" : "it ends", (unsigned long long)produced,
                (unsigned long long)bytes);
        return read_failed ? SWI_ERR_IO : SWI_ERR_INVALID_ARG;
    }
    return SWI_OK;
}
