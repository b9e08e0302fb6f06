/* dicom_screen.cxx -- one DICOM file's header read by DCMTK's dcmdata and checked before
 * GDCM sees the file. GDCM asserts (SIGABRT) or divides by zero on headers it does not
 * expect (a FrameIncrementPointer without NumberOfFrames, BitsAllocated 1 or 12, a file cut
 * short) and reads short or raw-under-a-compressed-syntax pixel data as if they were whole:
 * such files are refused here, naming the field. Large values (the pixels) are left on disk:
 * only their lengths are read. Built with DCMTK (dicom_seg_stub.c stands in without it). */
#include "io_internal.h"

#include <dcmtk/config/osconfig.h>
#include <dcmtk/dcmdata/dcdeftag.h>
#include <dcmtk/dcmdata/dcdict.h>
#include <dcmtk/dcmdata/dcfilefo.h>
#include <dcmtk/dcmdata/dcmetinf.h>
#include <dcmtk/dcmdata/dcxfer.h>
#include <dcmtk/oflog/oflog.h>

#include <cstdio>
#include <mutex>
#include <new>

namespace {

/* The transfer syntaxes GDCM decodes for swi: native, deflated, RLE, JPEG, JPEG-LS and
 * JPEG 2000. */
bool decodable(E_TransferSyntax x) {
    switch (x) {
    case EXS_LittleEndianImplicit:
    case EXS_LittleEndianExplicit:
    case EXS_BigEndianExplicit:
    case EXS_DeflatedLittleEndianExplicit:
    case EXS_RLELossless:
    case EXS_JPEGProcess1:
    case EXS_JPEGProcess2_4:
    case EXS_JPEGProcess14:
    case EXS_JPEGProcess14SV1:
    case EXS_JPEGLSLossless:
    case EXS_JPEGLSLossy:
    case EXS_JPEG2000LosslessOnly:
    case EXS_JPEG2000: return true;
    default: return false;
    }
}

/* A US element: 1 when present (value in *v), 0 when absent, -1 when present but not one
 * unsigned short. */
int get_us(DcmDataset *ds, const DcmTagKey &tag, Uint16 *v) {
    DcmElement *e = NULL;
    if (ds->findAndGetElement(tag, e).bad() || !e) return 0;
    if (e->getLength() == 0) return 0;
    return e->getVM() == 1 && e->getUint16(*v).good() ? 1 : -1;
}

/* Whether a VR read from the file fits the dictionary's (which may allow several). */
bool vr_fits(DcmEVR file, DcmEVR dict) {
    if (file == dict) return true;
    switch (dict) {
    case EVR_xs: return file == EVR_US || file == EVR_SS;
    case EVR_lt: return file == EVR_US || file == EVR_SS || file == EVR_OW;
    case EVR_ox:
    case EVR_px: return file == EVR_OB || file == EVR_OW;
    case EVR_up: return file == EVR_UL;
    default: return false;
    }
}

/* GDCM asserts when an image attribute it reads (group 0028, the position and orientation)
 * carries another VR than the standard's, as an explicit-VR file may say: refused by name. */
swi_status check_vrs(DcmDataset *ds, const char *file, char *err, size_t n) {
    for (unsigned long i = 0; i < ds->card(); i++) {
        DcmElement *e = ds->getElement(i);
        if (!e) continue;
        const DcmTag &t = e->getTag();
        if (t.getGroup() != 0x0028 && t != DCM_ImagePositionPatient && t != DCM_ImageOrientationPatient)
            continue;
        DcmTag dict(t.getGroup(), t.getElement());
        if (dict.getEVR() == EVR_UNKNOWN || dict.getEVR() == EVR_UN)
            continue; /* private or retired-unknown */
        if (!vr_fits(t.getEVR(), dict.getEVR())) {
            io__err(err, n, "%s: %s (%04X,%04X) has VR %s, and the standard's is %s", file, dict.getTagName(),
                    t.getGroup(), t.getElement(), DcmVR(t.getEVR()).getVRName(),
                    DcmVR(dict.getEVR()).getVRName());
            return SWI_ERR_INVALID_ARG;
        }
    }
    return SWI_OK;
}

/* Whether a multi-valued decimal string holds `want` finite numbers (into v). */
bool get_numbers(DcmDataset *ds, const DcmTagKey &tag, unsigned long want, double *v) {
    DcmElement *e = NULL;
    if (ds->findAndGetElement(tag, e).bad() || !e || e->getVM() != want) return false;
    for (unsigned long i = 0; i < want; i++) {
        Float64 d;
        if (e->getFloat64(d, i).bad() || !(d == d) || d > 1e300 || d < -1e300) return false;
        v[i] = d;
    }
    return true;
}

swi_status screen(const char *file, io_slice *s, char *err, size_t n) {
    DcmFileFormat ff;
    /* values longer than 4 KB stay on disk: only their lengths are read */
    OFCondition c = ff.loadFile(file, EXS_Unknown, EGL_noChange, 4096, ERM_autoDetect);
    if (c.bad()) {
        io__err(err, n, "%s: corrupt or truncated DICOM file (DCMTK: %s)", file, c.text());
        return SWI_ERR_INVALID_ARG;
    }
    DcmDataset *ds = ff.getDataset();
    E_TransferSyntax xs = ds->getOriginalXfer();
    DcmXfer xfer(xs);
    if (!decodable(xs)) {
        OFString uid;
        ff.getMetaInfo()->findAndGetOFString(DCM_TransferSyntaxUID, uid);
        io__err(err, n, "%s: TransferSyntaxUID (0002,0010) %s (%s) is not one swi decodes", file,
                uid.empty() ? "(none)" : uid.c_str(), xfer.getXferName());
        return SWI_ERR_INVALID_ARG;
    }
    if (check_vrs(ds, file, err, n) != SWI_OK) return SWI_ERR_INVALID_ARG;
    DcmElement *pixels = NULL;
    if (ds->findAndGetElement(DCM_PixelData, pixels).bad() || !pixels) {
        io__err(err, n, "%s: no PixelData (7FE0,0010): not an image", file);
        return SWI_ERR_INVALID_ARG;
    }
    struct Field {
        const char *name;
        DcmTagKey tag;
        Uint16 v;
        int got;
    } f[] = {{"Rows (0028,0010)", DCM_Rows, 0, 0},
             {"Columns (0028,0011)", DCM_Columns, 0, 0},
             {"BitsAllocated (0028,0100)", DCM_BitsAllocated, 0, 0},
             {"BitsStored (0028,0101)", DCM_BitsStored, 0, 0},
             {"HighBit (0028,0102)", DCM_HighBit, 0, 0},
             {"SamplesPerPixel (0028,0002)", DCM_SamplesPerPixel, 1, 0},
             {"PixelRepresentation (0028,0103)", DCM_PixelRepresentation, 0, 0}};
    for (Field &x : f) {
        x.got = get_us(ds, x.tag, &x.v);
        if (x.got < 0 || (x.got == 0 && x.tag != DCM_SamplesPerPixel && x.tag != DCM_HighBit &&
                          x.tag != DCM_BitsStored && x.tag != DCM_PixelRepresentation)) {
            io__err(err, n, "%s: %s is %s", file, x.name, x.got < 0 ? "not a number" : "missing");
            return SWI_ERR_INVALID_ARG;
        }
    }
    Uint16 rows = f[0].v, cols = f[1].v, ba = f[2].v, spp = f[5].v, pr = f[6].v;
    Uint16 bs = f[3].got ? f[3].v : ba, hb = f[4].got ? f[4].v : (Uint16)(bs - 1);
    if (rows == 0 || cols == 0) {
        io__err(err, n, "%s: %s is 0", file, rows == 0 ? f[0].name : f[1].name);
        return SWI_ERR_INVALID_ARG;
    }
    if (ba != 8 && ba != 16 && ba != 32) {
        io__err(err, n, "%s: BitsAllocated (0028,0100) is %u; swi reads 8, 16 or 32", file, (unsigned)ba);
        return SWI_ERR_INVALID_ARG;
    }
    if (bs < 1 || bs > ba || hb >= ba || hb + 1 < bs) {
        io__err(err, n,
                "%s: BitsStored (0028,0101) %u and HighBit (0028,0102) %u do not fit BitsAllocated %u", file,
                (unsigned)bs, (unsigned)hb, (unsigned)ba);
        return SWI_ERR_INVALID_ARG;
    }
    if (spp != 1) {
        io__err(err, n, "%s: SamplesPerPixel (0028,0002) is %u (a colour image); swi reads scalar volumes",
                file, (unsigned)spp);
        return SWI_ERR_INVALID_ARG;
    }
    if (pr > 1) {
        io__err(err, n, "%s: PixelRepresentation (0028,0103) is %u (0 or 1)", file, (unsigned)pr);
        return SWI_ERR_INVALID_ARG;
    }
    long frames = 1;
    DcmElement *nf = NULL;
    if (ds->findAndGetElement(DCM_NumberOfFrames, nf).good() && nf && nf->getLength() > 0) {
        Sint32 v = 0;
        if (nf->getVM() != 1 || nf->getSint32(v).bad() || v < 1) {
            io__err(err, n, "%s: NumberOfFrames (0028,0008) is not a positive number", file);
            return SWI_ERR_INVALID_ARG;
        }
        frames = v;
    } else if (ds->tagExists(DCM_FrameIncrementPointer)) {
        io__err(err, n, "%s: FrameIncrementPointer (0028,0009) without NumberOfFrames (0028,0008)", file);
        return SWI_ERR_INVALID_ARG;
    }
    const Uint32 len = pixels->getLengthField();
    if (xfer.isEncapsulated()) {
        if (len != DCM_UndefinedLength) {
            io__err(err, n,
                    "%s: TransferSyntaxUID (0002,0010) says %s, but PixelData (7FE0,0010) holds %lu bytes "
                    "unencapsulated (raw pixels, not compressed fragments)",
                    file, xfer.getXferName(), (unsigned long)len);
            return SWI_ERR_INVALID_ARG;
        }
    } else {
        const unsigned long long need =
            (unsigned long long)rows * cols * (ba / 8u) * spp * (unsigned long long)frames;
        if (len == DCM_UndefinedLength || (unsigned long long)len < need) {
            io__err(err, n,
                    "%s: PixelData (7FE0,0010) holds %lu bytes, and Rows x Columns x BitsAllocated/8 x "
                    "SamplesPerPixel x NumberOfFrames (%u x %u x %u x %u x %ld) is %llu: truncated or "
                    "inconsistent",
                    file, len == DCM_UndefinedLength ? 0ul : (unsigned long)len, (unsigned)rows,
                    (unsigned)cols, (unsigned)(ba / 8u), (unsigned)spp, frames, need);
            return SWI_ERR_INVALID_ARG;
        }
    }
    if (ds->tagExists(DCM_SharedFunctionalGroupsSequence) ||
        ds->tagExists(DCM_PerFrameFunctionalGroupsSequence)) {
        io__err(err, n,
                "%s: an enhanced (multi-frame) image, its geometry in functional groups; swi reads series "
                "of single-frame slices",
                file);
        return SWI_ERR_INVALID_ARG;
    }
    double geo[11] = {0};
    if (frames == 1) { /* a multi-frame image is refused by the series' assembly, by name */
        static const struct {
            const char *name;
            DcmTagKey tag;
            unsigned long vm, at;
        } want[] = {{"ImagePositionPatient (0020,0032)", DCM_ImagePositionPatient, 3, 0},
                    {"ImageOrientationPatient (0020,0037)", DCM_ImageOrientationPatient, 6, 3},
                    {"PixelSpacing (0028,0030)", DCM_PixelSpacing, 2, 9}};
        for (const auto &g : want)
            if (!get_numbers(ds, g.tag, g.vm, geo + g.at)) {
                io__err(err, n, "%s: %s is %s: swi places the slices by it", file, g.name,
                        ds->tagExists(g.tag) ? "not numbers" : "missing");
                return SWI_ERR_INVALID_ARG;
            }
    }
    if (s) { /* the geometry as the standard defines it (GDCM ignores it for some SOP classes) */
        OFString uid;
        ds->findAndGetOFString(DCM_SeriesInstanceUID, uid);
        snprintf(s->series_uid, sizeof s->series_uid, "%s", uid.c_str());
        /* who and when, for a reader of the results (review pages): text, never parsed */
        OFString text;
        ds->findAndGetOFString(DCM_StudyInstanceUID, text);
        snprintf(s->study_uid, sizeof s->study_uid, "%s", text.c_str());
        text.clear();
        ds->findAndGetOFString(DCM_PatientID, text);
        snprintf(s->patient_id, sizeof s->patient_id, "%s", text.c_str());
        text.clear();
        ds->findAndGetOFString(DCM_StudyDate, text);
        snprintf(s->study_date, sizeof s->study_date, "%s", text.c_str());
        s->cols = cols;
        s->rows = rows;
        s->frames = frames;
        s->components = 1;
        for (int a = 0; a < 3; a++) {
            s->origin[a] = geo[a];
            s->row_dir[a] = geo[3 + a];
            s->col_dir[a] = geo[6 + a];
        }
        s->spacing[0] = geo[10]; /* PixelSpacing is row spacing (along j), then column spacing */
        s->spacing[1] = geo[9];
    }
    return SWI_OK;
}

} // namespace

extern "C" int io__dicom_screen_available(void) { return 1; }

extern "C" void io__dicom_screen_warm(void) {
    static std::once_flag once;
    std::call_once(once, [] {
        OFLog::configure(OFLogger::OFF_LOG_LEVEL);
        dcmDataDict.rdlock(); /* loads the dictionary */
        dcmDataDict.rdunlock();
    });
}

extern "C" swi_status io__dicom_screen(const char *file, io_slice *s, char *err, size_t n) {
    static std::once_flag quiet;
    std::call_once(quiet, [] { OFLog::configure(OFLogger::OFF_LOG_LEVEL); });
    try {
        return screen(file, s, err, n);
    } catch (const std::bad_alloc &) {
        io__err(err, n, "%s: out of memory", file);
        return SWI_ERR_NOMEM;
    } catch (...) {
        io__err(err, n, "%s: corrupt DICOM file (DCMTK failed on it)", file);
        return SWI_ERR_INVALID_ARG;
    }
}
