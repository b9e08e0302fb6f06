/* dicom_seg.cxx -- a label map as a DICOM Segmentation object (binary) through DCMTK's
 * dcmseg, for a volume read from a DICOM series: patient, study and frame of reference
 * taken from the series, one segment per label present, one frame per segment and slice
 * holding it, each frame placed (ImagePositionPatient) and derived from its source slice,
 * each segment labelled with its class's name. Attributes of the source whose values break
 * their value representation (dates like 2004-01-19) would fail the whole write: they are
 * left out (UIDs, which the SEG needs, are kept, and named if the write fails).
 * Everything DCMTK does runs inside a try block; its logging is off. Built only with
 * DCMTK (dicom_seg_stub.c stands in without it). */
#include "io_internal.h"

#include <dcmtk/config/osconfig.h>
#include <dcmtk/dcmdata/dcdeftag.h>
#include <dcmtk/dcmdata/dcfilefo.h>
#include <dcmtk/dcmdata/dcsequen.h>
#include <dcmtk/dcmdata/dcuid.h>
#include <dcmtk/dcmfg/fgderimg.h>
#include <dcmtk/dcmfg/fgfracon.h>
#include <dcmtk/dcmfg/fgpixmsr.h>
#include <dcmtk/dcmfg/fgplanor.h>
#include <dcmtk/dcmfg/fgplanpo.h>
#include <dcmtk/dcmiod/iodreferences.h>
#include <dcmtk/dcmiod/modcommoninstanceref.h>
#include <dcmtk/dcmseg/segdoc.h>
#include <dcmtk/dcmseg/segment.h>
#include <dcmtk/oflog/oflog.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <unistd.h>
#include <vector>

namespace {

std::string num(double x) {
    char b[32];
    snprintf(b, sizeof b, "%.10g", x); /* a DICOM decimal string holds 16 characters */
    return b;
}

struct Slices {
    io_slice *s = nullptr;
    int64_t count = 0;
    ~Slices() { io__dicom_slices_free(s, count); }
};

swi_status fail(char *err, size_t n, const char *name, const char *what, const OFCondition &c) {
    io__err(err, n, "%s: DICOM SEG: %s: %s", name, what, c.text());
    return SWI_ERR_INVALID_ARG;
}

/* The attributes the SEG takes from its source as they are: an invalid one is named, not
 * dropped. */
bool needed(const DcmTagKey &t) {
    return t == DCM_StudyInstanceUID || t == DCM_FrameOfReferenceUID || t == DCM_SOPClassUID ||
           t == DCM_SOPInstanceUID || t == DCM_SeriesInstanceUID || t == DCM_SpecificCharacterSet;
}

std::string tag_name(DcmElement *e) {
    DcmTag tag = e->getTag();
    char b[64];
    snprintf(b, sizeof b, " (%04X,%04X)", tag.getGroup(), tag.getElement());
    return std::string(tag.getTagName()) + b;
}

/* Remove from item (and its sequences' items) every element whose value breaks its VR, but
 * the needed ones: those are listed in kept_bad. */
void drop_invalid(DcmItem *item, std::string &kept_bad) {
    for (unsigned long i = item->card(); i-- > 0;) {
        DcmElement *e = item->getElement(i);
        if (!e) continue;
        if (e->ident() == EVR_SQ) {
            DcmSequenceOfItems *sq = static_cast<DcmSequenceOfItems *>(e);
            for (unsigned long k = 0; k < sq->card(); k++) drop_invalid(sq->getItem(k), kept_bad);
            continue;
        }
        if (e->getTag().getGroup() == 0x7fe0 || e->checkValue("1-n").good()) continue;
        if (needed(e->getTag())) {
            if (kept_bad.empty()) kept_bad = tag_name(e);
            continue;
        }
        delete item->remove(e);
    }
}

/* A segment label (LO: at most 64 characters, no backslash or control character). */
std::string segment_label(const char *const *names, int64_t l) {
    std::string out;
    const char *nm = names ? names[l] : NULL;
    for (const char *p = nm ? nm : ""; *p && out.size() < 64; p++)
        out += (*p == '\\' || (unsigned char)*p < 0x20) ? '_' : *p;
    while (!out.empty() && out.back() == ' ') out.pop_back();
    return out.empty() ? "label " + std::to_string(l) : out;
}

swi_status build(const std::string &tmp, const char *name, const swi_volume *like, const void *labels,
                 int label_bytes, int64_t classes, const char *const *names, const swi_io_cancel *cancel,
                 char *err, size_t n) {
    const int64_t ni = like->size[0], nj = like->size[1], nk = like->size[2];
    Slices sl;
    swi_status st = io__dicom_slices(like, &sl.s, &sl.count, cancel, err, n);
    if (st) return st;
    auto label = [&](int64_t i, int64_t j, int64_t k) -> int64_t {
        size_t at = (size_t)((i * nj + j) * nk + k);
        return label_bytes == 1 ? ((const uint8_t *)labels)[at] : ((const uint16_t *)labels)[at];
    };
    /* which labels occur, and on which slices */
    std::vector<std::vector<char>> on((size_t)classes, std::vector<char>((size_t)nk, 0));
    for (int64_t i = 0; i < ni; i++)
        for (int64_t j = 0; j < nj; j++)
            for (int64_t k = 0; k < nk; k++) {
                int64_t l = label(i, j, k);
                if (l > 0 && l < classes) on[(size_t)l][(size_t)k] = 1;
            }

    /* the source's UIDs, slice by slice */
    std::vector<std::string> sop_class((size_t)nk), sop_inst((size_t)nk);
    for (int64_t k = 0; k < nk; k++) {
        DcmFileFormat ff;
        OFCondition c = ff.loadFile(sl.s[k].file);
        OFString a, b;
        if (c.good()) c = ff.getDataset()->findAndGetOFString(DCM_SOPClassUID, a);
        if (c.good()) c = ff.getDataset()->findAndGetOFString(DCM_SOPInstanceUID, b);
        if (c.bad()) {
            io__err(err, n, "%s: DICOM SEG: cannot take the UIDs of %s: %s", name, sl.s[k].file, c.text());
            return SWI_ERR_INVALID_ARG;
        }
        sop_class[(size_t)k] = a.c_str();
        sop_inst[(size_t)k] = b.c_str();
    }

    IODGeneralEquipmentModule::EquipmentInfo eq("libswi", "swi segment", "0", SWI_VERSION_STRING);
    ContentIdentificationMacro ci("1", "SWI_LABELS", "label map from swi segment", "swi");
    DcmSegmentation *raw = NULL;
    OFCondition c = DcmSegmentation::createBinarySegmentation(raw, (Uint16)nj, (Uint16)ni, eq, ci);
    if (c.bad() || !raw) return fail(err, n, name, "cannot create the object", c);
    std::unique_ptr<DcmSegmentation> seg(raw);
    DcmFileFormat source;
    std::string kept_bad;
    if ((c = source.loadFile(sl.s[0].file)).bad())
        return fail(err, n, name, "cannot read the source slice", c);
    drop_invalid(source.getDataset(), kept_bad);
    if ((c = seg->importFromSourceImage(*source.getDataset())).bad())
        return fail(err, n, name, "cannot take patient, study and frame of reference", c);
    seg->getSeries().setSeriesNumber("9901");
    seg->getSeries().setSeriesDescription("swi segment labels");

    OFString dim_uid;
    char uid[100];
    dim_uid = dcmGenerateUniqueIdentifier(uid, SITE_INSTANCE_UID_ROOT);
    IODMultiframeDimensionModule &dims = seg->getDimensions();
    if ((c = dims.addDimensionIndex(DCM_ReferencedSegmentNumber, dim_uid, DCM_SegmentIdentificationSequence,
                                    "ReferencedSegmentNumber"))
            .bad() ||
        (c = dims.addDimensionIndex(DCM_ImagePositionPatient, dim_uid, DCM_PlanePositionSequence,
                                    "ImagePositionPatient"))
            .bad())
        return fail(err, n, name, "dimensions", c);

    const io_slice &f = sl.s[0];
    std::unique_ptr<FGPlaneOrientationPatient> po(FGPlaneOrientationPatient::createMinimal(
        num(f.row_dir[0]).c_str(), num(f.row_dir[1]).c_str(), num(f.row_dir[2]).c_str(),
        num(f.col_dir[0]).c_str(), num(f.col_dir[1]).c_str(), num(f.col_dir[2]).c_str()));
    FGPixelMeasures pm;
    std::string ps = num(f.spacing[1]) + "\\" + num(f.spacing[0]); /* rows, then columns */
    if (!po || (c = pm.setPixelSpacing(ps.c_str())).bad() ||
        (c = pm.setSliceThickness(num(like->spacing[2]).c_str())).bad() ||
        (c = pm.setSpacingBetweenSlices(num(like->spacing[2]).c_str())).bad() ||
        (c = seg->addForAllFrames(*po)).bad() || (c = seg->addForAllFrames(pm)).bad())
        return fail(err, n, name, "shared functional groups", c);

    CodeSequenceMacro category("85756007", "SCT", "Tissue");
    CodeSequenceMacro type("85756007", "SCT", "Tissue");
    CodeSequenceMacro derivation("113076", "DCM", "Segmentation");
    CodeSequenceMacro purpose("121322", "DCM", "Source image for image processing operation");
    std::vector<Uint8> frame((size_t)(ni * nj));
    int64_t segments = 0;
    for (int64_t l = 1; l < classes; l++) {
        bool any = false;
        for (int64_t k = 0; k < nk && !any; k++) any = on[(size_t)l][(size_t)k];
        if (!any) continue;
        DcmSegment *sg = NULL;
        std::string lab = segment_label(names, l);
        if ((c = DcmSegment::create(sg, lab.c_str(), category, type, DcmSegTypes::SAT_AUTOMATIC,
                                    "swi segment"))
                .bad() ||
            !sg)
            return fail(err, n, name, "segment", c);
        Uint16 number = 0;
        if ((c = seg->addSegment(sg, number)).bad()) {
            delete sg;
            return fail(err, n, name, "segment", c);
        }
        segments++;
        for (int64_t k = 0; k < nk; k++) {
            if (!on[(size_t)l][(size_t)k]) continue;
            if (io__cancelled(cancel)) {
                io__err(err, n, "interrupted");
                return SWI_ERR_CANCELLED;
            }
            for (int64_t j = 0; j < nj; j++) /* frame rows are j, columns i */
                for (int64_t i = 0; i < ni; i++) frame[(size_t)(j * ni + i)] = label(i, j, k) == l;
            const io_slice &t = sl.s[k];
            std::unique_ptr<FGPlanePosPatient> pp(FGPlanePosPatient::createMinimal(
                num(t.origin[0]).c_str(), num(t.origin[1]).c_str(), num(t.origin[2]).c_str()));
            FGFrameContent fc;
            OFVector<ImageSOPInstanceReferenceMacro> refs;
            ImageSOPInstanceReferenceMacro ref;
            if (!pp || (c = ref.setReferencedSOPClassUID(sop_class[(size_t)k].c_str())).bad() ||
                (c = ref.setReferencedSOPInstanceUID(sop_inst[(size_t)k].c_str())).bad())
                return fail(err, n, name, "frame reference", c);
            refs.push_back(ref);
            std::unique_ptr<FGDerivationImage> di(
                FGDerivationImage::createMinimal(refs, "swi segment", derivation, purpose));
            if (!di || (c = fc.setDimensionIndexValues(number, 0)).bad() ||
                (c = fc.setDimensionIndexValues((Uint32)(k + 1), 1)).bad())
                return fail(err, n, name, "frame content", c);
            OFVector<FGBase *> groups;
            groups.push_back(pp.get());
            groups.push_back(&fc);
            groups.push_back(di.get());
            if ((c = seg->addFrame(frame.data(), number, groups)).bad())
                return fail(err, n, name, "frame", c);
        }
    }
    /* the Referenced Series Sequence: every source slice */
    IODReferences refs_all;
    OFVector<OFString> files;
    for (int64_t k = 0; k < nk; k++) files.push_back(sl.s[k].file);
    if (refs_all.addFromFiles(files) != (size_t)nk ||
        seg->getCommonInstanceReference().addReferences(refs_all) != (size_t)nk) {
        io__err(err, n, "%s: DICOM SEG: cannot reference the source slices", name);
        return SWI_ERR_INVALID_ARG;
    }
    if (segments == 0) {
        io__err(err, n, "%s: the label map holds no label above 0: a DICOM SEG needs a segment", name);
        return SWI_ERR_INVALID_ARG;
    }
    if ((c = seg->saveFile(tmp.c_str(), EXS_LittleEndianExplicit)).bad()) {
        if (!kept_bad.empty())
            io__err(err, n,
                    "%s: DICOM SEG: writing: %s (the source's %s in %s breaks its value representation)",
                    name, c.text(), kept_bad.c_str(), sl.s[0].file);
        else
            fail(err, n, name, "writing", c);
        return SWI_ERR_INVALID_ARG;
    }
    return SWI_OK;
}

} // namespace

extern "C" int io__dcmseg_available(void) { return 1; }

extern "C" swi_status io__dcmseg_write_fd(int fd, const char *name, const swi_volume *like,
                                          const void *labels, swi_dtype dtype, int64_t classes,
                                          const char *const *names, const swi_io_cancel *cancel, char *err,
                                          size_t n) {
    const char *bad = NULL;
    if (fd < 0)
        bad = "fd < 0";
    else if (like->format != SWI_IO_DICOM)
        bad = "a DICOM SEG output needs a DICOM series input (it references its slices)";
    else if (dtype != SWI_DTYPE_UINT8 && dtype != SWI_DTYPE_UINT16)
        bad = "a DICOM SEG holds labels (SWI_DTYPE_UINT8 or _UINT16)";
    else if (classes < 2 || classes > 65535)
        bad = "classes must be 2..65535";
    else if (like->size[0] > 65535 || like->size[1] > 65535)
        bad = "slices larger than 65535 pixels";
    if (bad) {
        if (fd >= 0) close(fd);
        io__err(err, n, "%s: %s", name, bad);
        return SWI_ERR_INVALID_ARG;
    }
    static std::once_flag quiet;
    std::call_once(quiet, [] { OFLog::configure(OFLogger::OFF_LOG_LEVEL); });
    const char *tdir = getenv("TMPDIR");
    std::string dirt = std::string(tdir && *tdir ? tdir : "/tmp") + "/swi-seg-XXXXXX";
    std::vector<char> dirbuf(dirt.begin(), dirt.end());
    dirbuf.push_back('\0');
    if (!mkdtemp(dirbuf.data())) {
        int e = errno;
        close(fd);
        io__err(err, n, "%s: cannot make a temporary directory: %s", name, strerror(e));
        return SWI_ERR_IO;
    }
    std::string tmp = std::string(dirbuf.data()) + "/seg.dcm";
    swi_status st;
    try {
        st = build(tmp, name, like, labels, dtype == SWI_DTYPE_UINT8 ? 1 : 2, classes, names, cancel, err, n);
    } catch (const std::bad_alloc &) {
        io__err(err, n, "%s: out of memory", name);
        st = SWI_ERR_NOMEM;
    } catch (const std::exception &e) {
        io__err(err, n, "%s: DICOM SEG: %s", name, e.what());
        st = SWI_ERR_INVALID_ARG;
    } catch (...) {
        io__err(err, n, "%s: DICOM SEG: unknown error", name);
        st = SWI_ERR_INVALID_ARG;
    }
    if (st == SWI_OK) st = io__copy_into(tmp.c_str(), fd, name, err, n);
    unlink(tmp.c_str());
    rmdir(dirbuf.data());
    if (close(fd) != 0 && st == SWI_OK) {
        io__err(err, n, "%s: write failed: %s", name, strerror(errno));
        st = SWI_ERR_IO;
    }
    return st;
}
