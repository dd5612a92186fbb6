//! Bounds on what a workbook may make the reader allocate, checked before it reaches calamine.
//!
//! calamine's `.xls` reader turns every sheet into a dense rows × columns array sized by the
//! extreme cell addresses (and reserves what the DIMENSIONS record claims). A damaged file with
//! one cell at row 65,535, column 65,535 therefore asks for ~28 GB and the process aborts — found
//! by the `top500_reader` fuzz target (regression test `fuzz_crash_b3973848_huge_xls_extent` in `tests.rs`).
//! This module reads the workbook stream itself (MS-XLS record layout) and rejects sheets whose
//! extent exceeds [`MAX_CELLS`], so corrupt input gives an error instead of an abort. For
//! `.xlsx`, calamine reserves the shared-string table's declared `uniqueCount` up front, so that
//! count is bounded too; the cells themselves are streamed and bounded in `grid.rs`.

use std::io::{Cursor, Read};

/// Largest sheet (rows × columns) amdahl reads: ~130 MB in calamine's representation; a TOP500
/// list is about 500 × 40 cells.
pub const MAX_CELLS: u64 = 1 << 22;

fn u16_at(d: &[u8], at: usize) -> Option<u32> {
    Some(u32::from(u16::from_le_bytes(
        d.get(at..at + 2)?.try_into().ok()?,
    )))
}

fn u32_at(d: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(d.get(at..at + 4)?.try_into().ok()?))
}

/// BIFF records from `stream`: (type, data) until the stream ends or a record is truncated.
fn records(mut stream: &[u8]) -> impl Iterator<Item = (u16, &[u8])> {
    std::iter::from_fn(move || {
        let typ = u16_at(stream, 0)? as u16;
        let len = u16_at(stream, 2)? as usize;
        let data = stream.get(4..4 + len)?;
        stream = stream.get(4 + len..)?;
        Some((typ, data))
    })
}

/// Largest shared-string table amdahl accepts (one string per cell at most).
const MAX_SHARED_STRINGS: u64 = MAX_CELLS;

/// Most bytes an `.xlsx` may unpack to, all parts together: 64 MiB. The official lists unpack to
/// about 1 MB; a 3 MB archive of whitespace unpacks to 3 GB, which calamine would hold in memory.
pub const MAX_UNPACKED: u64 = 64 << 20;

/// Check what an `.xlsx` unpacks to (decompressing once into nothing, so a lying header does not
/// help) and the shared-string count it declares; `Err` carries the reason.
pub fn xlsx(bytes: &[u8]) -> Result<(), String> {
    let mut zip = zip::ZipArchive::new(Cursor::new(bytes))
        .map_err(|e| format!("not a valid zip archive: {e}"))?;
    let mut unpacked: u64 = 0;
    for i in 0..zip.len() {
        let Ok(entry) = zip.by_index(i) else { continue };
        let left = MAX_UNPACKED - unpacked;
        // A part that fails to decompress is calamine's to report, with its own message.
        unpacked += std::io::copy(&mut entry.take(left + 1), &mut std::io::sink()).unwrap_or(0);
        if unpacked > MAX_UNPACKED {
            return Err(format!(
                "the workbook unpacks to more than {} MiB (an official TOP500 list unpacks to about 1 MB); \
                 the file is probably damaged or not a TOP500 list (a larger list can be read as CSV)",
                MAX_UNPACKED >> 20
            ));
        }
    }
    for i in 0..zip.len() {
        let Ok(entry) = zip.by_index(i) else { continue };
        if !entry
            .name()
            .to_ascii_lowercase()
            .ends_with("sharedstrings.xml")
        {
            continue;
        }
        // The <sst uniqueCount="…"> start tag sits at the top of the part.
        let mut head = Vec::new();
        entry
            .take(64 * 1024)
            .read_to_end(&mut head)
            .map_err(|e| format!("the shared strings cannot be read: {e}"))?;
        if let Some(n) = unique_count(&head) {
            if n > MAX_SHARED_STRINGS {
                return Err(format!(
                    "the workbook declares {n} shared strings, more than the {MAX_SHARED_STRINGS} amdahl reads (the file is probably damaged)"
                ));
            }
        }
    }
    Ok(())
}

/// The number in `uniqueCount="N"` (either quote), saturating.
fn unique_count(xml: &[u8]) -> Option<u64> {
    let key = b"uniqueCount=";
    let at = xml.windows(key.len()).position(|w| w == key)? + key.len();
    let rest = xml.get(at + 1..)?;
    let digits = rest.iter().take_while(|b| b.is_ascii_digit());
    Some(digits.fold(0u64, |n, d| {
        n.saturating_mul(10).saturating_add(u64::from(d - b'0'))
    }))
}

/// Check every sheet substream of an `.xls` file; `Err` carries the reason.
pub fn xls(bytes: &[u8]) -> Result<(), String> {
    let mut comp = cfb::CompoundFile::open(Cursor::new(bytes))
        .map_err(|e| format!("not a valid OLE compound file: {e}"))?;
    // The stream names calamine tries, in its order.
    let Some(name) = ["Workbook", "Book", "WORKBOOK", "BOOK"]
        .into_iter()
        .find(|n| comp.is_stream(n))
    else {
        return Err("no Workbook stream (is this an Excel 97–2003 .xls file?)".into());
    };
    let mut stream = Vec::new();
    comp.open_stream(name)
        .and_then(|mut s| s.read_to_end(&mut stream))
        .map_err(|e| format!("the Workbook stream cannot be read: {e}"))?;
    // Globals substream: BoundSheet8 (0x0085) records give each sheet's offset, up to EOF.
    let mut offsets = Vec::new();
    for (typ, data) in records(&stream) {
        match typ {
            0x0085 => offsets.extend(u32_at(data, 0)),
            0x000A => break,
            _ => {}
        }
    }
    for off in offsets {
        let sheet = stream.get(off as usize..).unwrap_or(&[]);
        check_sheet(sheet)?;
    }
    Ok(())
}

/// Walk one sheet substream (as calamine does, from its BOF to EOF) and bound its extent.
fn check_sheet(sheet: &[u8]) -> Result<(), String> {
    let (mut r0, mut r1, mut c0, mut c1) = (u32::MAX, 0u32, u32::MAX, 0u32);
    let mut seen = false;
    let mut mark = |r: u32, c: u32| {
        seen = true;
        r0 = r0.min(r);
        r1 = r1.max(r);
        c0 = c0.min(c);
        c1 = c1.max(c);
    };
    for (typ, data) in records(sheet) {
        match typ {
            // DIMENSIONS (MS-XLS 2.4.90): calamine reserves (last − first) rows × columns.
            0x0200 => {
                let dims = match data.len() {
                    10 => (
                        u16_at(data, 0),
                        u16_at(data, 2),
                        u16_at(data, 4),
                        u16_at(data, 6),
                    ),
                    14 => (
                        u32_at(data, 0),
                        u32_at(data, 4),
                        u16_at(data, 8),
                        u16_at(data, 10),
                    ),
                    _ => continue,
                };
                if let (Some(rf), Some(rl), Some(cf), Some(cl)) = dims {
                    let cf = if cf > 0xFF || cl < cf { 0 } else { cf };
                    if rl >= 1 && cl >= 1 {
                        let rows = i64::from(rl) - i64::from(rf);
                        let cols = i64::from(cl) - i64::from(cf);
                        if rows <= 0
                            || cols <= 0
                            || (rows as u64).saturating_mul(cols as u64) > MAX_CELLS
                        {
                            return Err(format!(
                                "a sheet declares rows {rf}..{rl} and columns {cf}..{cl}, more than the {MAX_CELLS} cells amdahl reads (the file is probably damaged)"
                            ));
                        }
                    }
                }
            }
            // Cell records with (row, column) first: NUMBER, LABEL, BOOLERR, RK, LABELSST, FORMULA.
            0x0203 | 0x0204 | 0x0205 | 0x027E | 0x00FD | 0x0006 => {
                if let (Some(r), Some(c)) = (u16_at(data, 0), u16_at(data, 2)) {
                    mark(r, c);
                }
            }
            // MULRK: row, first column, …, last column in the final two bytes.
            0x00BD => {
                if let (Some(r), Some(c), Some(l)) = (
                    u16_at(data, 0),
                    u16_at(data, 2),
                    data.len().checked_sub(2).and_then(|at| u16_at(data, at)),
                ) {
                    mark(r, c);
                    mark(r, l);
                }
            }
            0x000A => break,
            _ => {}
        }
    }
    if seen {
        let cells = u64::from(r1 - r0 + 1) * u64::from(c1 - c0 + 1);
        if cells > MAX_CELLS {
            return Err(format!(
                "a sheet has cells from row {} to {} and column {} to {} ({cells} cells), more than the {MAX_CELLS} amdahl reads (the file is probably damaged)",
                r0 + 1,
                r1 + 1,
                c0 + 1,
                c1 + 1
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xlsx_zip_bomb_of_whitespace_is_refused_before_calamine() {
        // Regression: a 3.2 MB archive of whitespace made `top500` use 3 GB.
        use std::io::Write;
        let mut buf = Cursor::new(Vec::new());
        {
            let mut z = zip::ZipWriter::new(&mut buf);
            let opts = zip::write::SimpleFileOptions::default()
                .compression_method(zip::CompressionMethod::Deflated);
            z.start_file("xl/worksheets/sheet1.xml", opts).unwrap();
            let blank = vec![b' '; 1 << 20];
            for _ in 0..(MAX_UNPACKED >> 20) + 1 {
                z.write_all(&blank).unwrap();
            }
            z.finish().unwrap();
        }
        let bytes = buf.into_inner();
        assert!(bytes.len() < 1 << 20, "{}", bytes.len());
        let e = xlsx(&bytes).unwrap_err();
        assert!(e.contains("more than 64 MiB"), "{e}");
    }

    fn rec(typ: u16, data: &[u8]) -> Vec<u8> {
        let mut v = typ.to_le_bytes().to_vec();
        v.extend((data.len() as u16).to_le_bytes());
        v.extend(data);
        v
    }

    #[test]
    fn far_apart_cells_are_rejected() {
        let mut s = rec(0x0203, &[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        s.extend(rec(
            0x0203,
            &[0xFF, 0xFF, 0xFF, 0xFF, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
        ));
        s.extend(rec(0x000A, &[]));
        let e = check_sheet(&s).unwrap_err();
        assert!(e.contains("probably damaged"), "{e}");
    }

    #[test]
    fn huge_or_inverted_dimensions_are_rejected() {
        // BIFF8 DIMENSIONS: rows 0..1,000,000, columns 0..200.
        let mut d = 0u32.to_le_bytes().to_vec();
        d.extend(1_000_000u32.to_le_bytes());
        d.extend([0, 0, 200, 0, 0, 0]);
        assert!(check_sheet(&rec(0x0200, &d)).is_err());
        // Last row before the first.
        let mut d = 10u32.to_le_bytes().to_vec();
        d.extend(5u32.to_le_bytes());
        d.extend([0, 0, 4, 0, 0, 0]);
        assert!(check_sheet(&rec(0x0200, &d)).is_err());
    }

    #[test]
    fn a_normal_sheet_passes() {
        let mut s = rec(0x0203, &[1, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        s.extend(rec(
            0x00BD,
            &[1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0],
        ));
        assert!(check_sheet(&s).is_ok());
        assert!(xls(b"not ole").is_err());
        assert!(xlsx(b"PK not zip").is_err());
    }

    #[test]
    fn unique_count_is_read_and_saturates() {
        assert_eq!(
            unique_count(br#"<sst count="5" uniqueCount="42">"#),
            Some(42)
        );
        assert_eq!(unique_count(b"<sst uniqueCount='7'>"), Some(7));
        assert_eq!(
            unique_count(br#"uniqueCount="99999999999999999999999""#),
            Some(u64::MAX)
        );
        assert_eq!(unique_count(b"<sst>"), None);
    }
}
