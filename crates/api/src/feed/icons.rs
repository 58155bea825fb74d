//! A published application's icons: proof that a file is a PNG or an ICO
//! of at most 256×256 pixels ([`check_png`], [`check_ico`]), and the two
//! forms the workspace feed names, derived from whichever was given
//! ([`feed_icons`]): a 32×32 PNG (`Icon32`, what Windows App shows) and an
//! ICO (`IconRaw`, what Windows puts in its Start menu).
//!
//! Every check reads the dimensions from the file's headers before
//! anything is decompressed or allocated for pixels, so a small file that
//! claims 60000×60000 pixels costs nothing but its refusal. Only then is
//! the whole file decoded (its checksums and compressed data included), by
//! the `png` crate for PNG (also PNG images inside an ICO) and by the `ico`
//! crate for an ICO's BMP images, so that a file that passes is an image
//! every client can show.

use std::io::Cursor;

use ico::{IconDir, IconDirEntry, IconImage, ResourceType};

/// The largest width or height of an icon, as Windows' largest icons are.
pub const MAX_ICON_SIDE: u32 = 256;
/// The most images one ICO holds (Windows' own hold up to ten or so sizes).
pub const MAX_ICO_IMAGES: usize = 16;
/// The largest icon file, in bytes: as the model admits
/// ([`placement::MAX_ICON_BYTES`]).
pub const MAX_ICON_BYTES: usize = placement::MAX_ICON_BYTES;
/// The side of the feed's `Icon32`.
pub const FEED_PNG_SIDE: u32 = 32;
/// What decoding one PNG may allocate: a 256×256 image at 16 bits a channel
/// is 512 KiB, and the decoder needs some room besides.
const DECODE_LIMIT_BYTES: usize = 4 * 1024 * 1024;

const PNG_SIGNATURE: [u8; 8] = [0x89, b'P', b'N', b'G', 0x0d, 0x0a, 0x1a, 0x0a];
/// An ICO's header: reserved, type, count (each 16 bits).
const ICO_HEADER_BYTES: usize = 6;
/// One entry of an ICO's directory.
const ICO_ENTRY_BYTES: usize = 16;
/// A BMP image's BITMAPINFOHEADER, the only header ICO files use.
const BMP_INFO_HEADER_BYTES: usize = 40;

/// An image's width and height, in pixels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Size {
    pub width: u32,
    pub height: u32,
}

/// The two kinds of icon file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum IconFormat {
    Png,
    Ico,
}

impl std::fmt::Display for IconFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            IconFormat::Png => "PNG",
            IconFormat::Ico => "ICO",
        })
    }
}

/// Why an icon is refused. The caller prefixes the field it came in
/// (`iconPng: …`), which [`IconError::format`] tells.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum IconError {
    #[error("the {format} is {bytes} bytes; an icon is at most {MAX_ICON_BYTES} bytes")]
    TooManyBytes { format: IconFormat, bytes: usize },
    #[error("not a valid {format}: {reason}")]
    Malformed { format: IconFormat, reason: String },
    #[error(
        "{what} is {width}×{height} pixels; an icon is at most \
         {MAX_ICON_SIDE}×{MAX_ICON_SIDE}"
    )]
    TooLarge {
        format: IconFormat,
        /// Which image: `the PNG`, or `the ICO's image 2`.
        what: String,
        width: u32,
        height: u32,
    },
    #[error("the {format} could not be written: {reason}")]
    Encode { format: IconFormat, reason: String },
}

impl IconError {
    /// The kind of file refused, so that the caller can name the field it
    /// came in (`iconPng`, `iconIco`).
    pub fn format(&self) -> IconFormat {
        match self {
            IconError::TooManyBytes { format, .. }
            | IconError::Malformed { format, .. }
            | IconError::TooLarge { format, .. }
            | IconError::Encode { format, .. } => *format,
        }
    }
}

fn malformed(format: IconFormat, reason: impl std::fmt::Display) -> IconError {
    IconError::Malformed {
        format,
        reason: reason.to_string(),
    }
}

/// What the feed serves for one resource.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FeedIcons {
    /// The ICO (`IconRaw`).
    pub ico: Vec<u8>,
    /// A 32×32 PNG (`Icon32`).
    pub png_32: Vec<u8>,
}

/// Proves `bytes` a PNG of at most [`MAX_ICON_SIDE`] pixels a side and
/// [`MAX_ICON_BYTES`] bytes that decodes whole; its size.
pub fn check_png(bytes: &[u8]) -> Result<Size, IconError> {
    decode_png(bytes, IconFormat::Png, "the PNG").map(|image| image.size())
}

/// Proves `bytes` an ICO (not a cursor) of 1 to [`MAX_ICO_IMAGES`] images,
/// each at most [`MAX_ICON_SIDE`] pixels a side and decoding whole, in at
/// most [`MAX_ICON_BYTES`] bytes; the size of each image, in the file's
/// order.
pub fn check_ico(bytes: &[u8]) -> Result<Vec<Size>, IconError> {
    Ok(decode_ico(bytes)?.iter().map(Rgba::size).collect())
}

/// The feed's two icons of a resource given a PNG, an ICO or both (`None`
/// when neither), each checked as [`check_png`] and [`check_ico`] do:
///
/// - the PNG: the given one when it is 32×32; else the given PNG, or the
///   ICO's image nearest 32×32 (the 32×32 one, else the smallest larger
///   one, else the largest), scaled to 32×32, a non-square image centred on
///   a transparent square first;
/// - the ICO: the given one; else one made from the PNG, holding it at
///   32×32 and, when it is larger, at its own size (centred on a square).
pub fn feed_icons(png: Option<&[u8]>, ico: Option<&[u8]>) -> Result<Option<FeedIcons>, IconError> {
    let (png_32, ico) = match (png, ico) {
        (None, None) => return Ok(None),
        (Some(png), ico) => {
            let image = decode_png(png, IconFormat::Png, "the PNG")?;
            let png_32 = if image.size() == square(FEED_PNG_SIDE) {
                png.to_vec()
            } else {
                encode_png(&image.to_square(FEED_PNG_SIDE))?
            };
            let ico = match ico {
                Some(ico) => {
                    decode_ico(ico)?;
                    ico.to_vec()
                }
                None => ico_of(&image)?,
            };
            (png_32, ico)
        }
        (None, Some(ico)) => {
            let images = decode_ico(ico)?;
            // decode_ico admits no ICO without an image.
            let nearest = images
                .iter()
                .min_by_key(|image| preference(image.size()))
                .ok_or_else(|| malformed(IconFormat::Ico, "it holds no image"))?;
            (encode_png(&nearest.to_square(FEED_PNG_SIDE))?, ico.to_vec())
        }
    };
    Ok(Some(FeedIcons { ico, png_32 }))
}

fn square(side: u32) -> Size {
    Size {
        width: side,
        height: side,
    }
}

/// How well an ICO's image of `size` makes a 32×32 PNG: lowest first.
fn preference(size: Size) -> (u8, i64) {
    let area = i64::from(size.width) * i64::from(size.height);
    if size == square(FEED_PNG_SIDE) {
        (0, 0)
    } else if size.width >= FEED_PNG_SIDE && size.height >= FEED_PNG_SIDE {
        // Scaling down loses least from the smallest larger image.
        (1, area)
    } else {
        (2, -area)
    }
}

/// An image as 8-bit RGBA, rows top to bottom.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Rgba {
    width: u32,
    height: u32,
    pixels: Vec<u8>,
}

impl Rgba {
    fn size(&self) -> Size {
        Size {
            width: self.width,
            height: self.height,
        }
    }

    /// The image centred on a transparent square and scaled to `side`
    /// pixels a side: each new pixel averages the area of the old ones it
    /// covers, weighted by their opacity (so transparent pixels lend no
    /// colour to the edges).
    fn to_square(&self, side: u32) -> Rgba {
        if self.width == side && self.height == side {
            return self.clone();
        }
        let canvas = self.width.max(self.height);
        let left = i64::from((canvas - self.width) / 2);
        let top = i64::from((canvas - self.height) / 2);
        let scale = f64::from(canvas) / f64::from(side);
        let mut pixels = Vec::with_capacity((side as usize) * (side as usize) * 4);
        for dy in 0..side {
            let (y0, y1) = (f64::from(dy) * scale, f64::from(dy + 1) * scale);
            for dx in 0..side {
                let (x0, x1) = (f64::from(dx) * scale, f64::from(dx + 1) * scale);
                let mut sum = [0f64; 4];
                let mut area = 0f64;
                for sy in (y0.floor() as i64)..(y1.ceil() as i64) {
                    let wy = (y1.min((sy + 1) as f64) - y0.max(sy as f64)).max(0.0);
                    for sx in (x0.floor() as i64)..(x1.ceil() as i64) {
                        let wx = (x1.min((sx + 1) as f64) - x0.max(sx as f64)).max(0.0);
                        let weight = wx * wy;
                        area += weight;
                        let (ix, iy) = (sx - left, sy - top);
                        if ix < 0
                            || iy < 0
                            || ix >= i64::from(self.width)
                            || iy >= i64::from(self.height)
                        {
                            continue;
                        }
                        let at = ((iy as usize) * (self.width as usize) + ix as usize) * 4;
                        let px = &self.pixels[at..at + 4];
                        let alpha = f64::from(px[3]) / 255.0 * weight;
                        for c in 0..3 {
                            sum[c] += f64::from(px[c]) * alpha;
                        }
                        sum[3] += alpha;
                    }
                }
                if sum[3] <= 0.0 || area <= 0.0 {
                    pixels.extend_from_slice(&[0, 0, 0, 0]);
                    continue;
                }
                for c in &sum[..3] {
                    pixels.push((c / sum[3]).round().clamp(0.0, 255.0) as u8);
                }
                pixels.push((sum[3] / area * 255.0).round().clamp(0.0, 255.0) as u8);
            }
        }
        Rgba {
            width: side,
            height: side,
            pixels,
        }
    }
}

/// The size a PNG's header (its signature and first chunk, IHDR) gives,
/// without decoding anything.
fn png_header_size(bytes: &[u8], format: IconFormat) -> Result<Size, IconError> {
    if bytes.len() < 8 || bytes[..8] != PNG_SIGNATURE {
        return Err(malformed(format, "the PNG signature is missing"));
    }
    // The IHDR chunk: length (13), type, width, height, then five bytes.
    if bytes.len() < 8 + 8 + 13 {
        return Err(malformed(format, "the PNG ends before its header"));
    }
    let length = u32::from_be_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]);
    if length != 13 || &bytes[12..16] != b"IHDR" {
        return Err(malformed(
            format,
            "the PNG does not begin with its header (IHDR)",
        ));
    }
    let width = u32::from_be_bytes([bytes[16], bytes[17], bytes[18], bytes[19]]);
    let height = u32::from_be_bytes([bytes[20], bytes[21], bytes[22], bytes[23]]);
    if width == 0 || height == 0 {
        return Err(malformed(
            format,
            format!("the PNG's header says {width}×{height} pixels"),
        ));
    }
    Ok(Size { width, height })
}

fn check_side(format: IconFormat, what: &str, size: Size) -> Result<(), IconError> {
    if size.width > MAX_ICON_SIDE || size.height > MAX_ICON_SIDE {
        return Err(IconError::TooLarge {
            format,
            what: what.to_string(),
            width: size.width,
            height: size.height,
        });
    }
    Ok(())
}

fn check_bytes(bytes: &[u8], format: IconFormat) -> Result<(), IconError> {
    if bytes.len() > MAX_ICON_BYTES {
        return Err(IconError::TooManyBytes {
            format,
            bytes: bytes.len(),
        });
    }
    Ok(())
}

/// A PNG (alone, or inside an ICO: `format`), its size checked from its
/// header first, decoded whole to RGBA.
fn decode_png(bytes: &[u8], format: IconFormat, what: &str) -> Result<Rgba, IconError> {
    check_bytes(bytes, format)?;
    let size = png_header_size(bytes, format)?;
    check_side(format, what, size)?;
    let mut decoder = png::Decoder::new_with_limits(
        Cursor::new(bytes),
        png::Limits {
            bytes: DECODE_LIMIT_BYTES,
        },
    );
    decoder.set_transformations(
        png::Transformations::EXPAND | png::Transformations::STRIP_16 | png::Transformations::ALPHA,
    );
    let mut reader = decoder.read_info().map_err(|e| malformed(format, e))?;
    let length = reader
        .output_buffer_size()
        .ok_or_else(|| malformed(format, "the image does not fit in memory"))?;
    let mut buffer = vec![0u8; length];
    let frame = reader
        .next_frame(&mut buffer)
        .map_err(|e| malformed(format, e))?;
    reader.finish().map_err(|e| malformed(format, e))?;
    if frame.width != size.width || frame.height != size.height {
        return Err(malformed(
            format,
            "the PNG's image is not the size its header says",
        ));
    }
    let pixels = (frame.width as usize) * (frame.height as usize);
    let pixels = match frame.color_type {
        png::ColorType::Rgba => {
            buffer.truncate(pixels * 4);
            buffer
        }
        png::ColorType::GrayscaleAlpha => buffer[..pixels * 2]
            .chunks_exact(2)
            .flat_map(|ga| [ga[0], ga[0], ga[0], ga[1]])
            .collect(),
        other => {
            return Err(malformed(
                format,
                format!("unexpected colour type {other:?} after expansion"),
            ));
        }
    };
    Ok(Rgba {
        width: size.width,
        height: size.height,
        pixels,
    })
}

/// An ICO, every image's size checked from its header first, then every
/// image decoded whole.
fn decode_ico(bytes: &[u8]) -> Result<Vec<Rgba>, IconError> {
    let format = IconFormat::Ico;
    check_bytes(bytes, format)?;
    if bytes.len() < ICO_HEADER_BYTES {
        return Err(malformed(format, "it ends before its header"));
    }
    let u16_at = |at: usize| u16::from_le_bytes([bytes[at], bytes[at + 1]]);
    let u32_at =
        |at: usize| u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]]);
    if u16_at(0) != 0 {
        return Err(malformed(format, "its header's reserved field is not 0"));
    }
    match u16_at(2) {
        1 => {}
        2 => return Err(malformed(format, "it is a cursor (CUR), not an icon")),
        other => {
            return Err(malformed(
                format,
                format!("its header's type is {other}, not 1 (icon)"),
            ));
        }
    }
    let count = usize::from(u16_at(4));
    if count == 0 || count > MAX_ICO_IMAGES {
        return Err(malformed(
            format,
            format!("it holds {count} images; an icon holds 1 to {MAX_ICO_IMAGES}"),
        ));
    }
    let directory_end = ICO_HEADER_BYTES + count * ICO_ENTRY_BYTES;
    if bytes.len() < directory_end {
        return Err(malformed(format, "it ends inside its directory"));
    }
    let mut images = Vec::with_capacity(count);
    for index in 0..count {
        let entry = ICO_HEADER_BYTES + index * ICO_ENTRY_BYTES;
        let size = u32_at(entry + 8) as usize;
        let offset = u32_at(entry + 12) as usize;
        let what = format!("the ICO's image {index}");
        let end = offset.checked_add(size).filter(|&end| end <= bytes.len());
        let Some(end) = end.filter(|_| offset >= directory_end && size > 0) else {
            return Err(malformed(
                format,
                format!("{what}'s data ({size} bytes at {offset}) is not inside the file"),
            ));
        };
        let data = &bytes[offset..end];
        if data.starts_with(&PNG_SIGNATURE) {
            check_side(format, &what, png_header_size(data, format)?)?;
        } else {
            check_side(format, &what, bmp_header_size(data, &what)?)?;
        }
        images.push(data);
    }
    // Every size is known to be small: now decode.
    let directory = IconDir::read(Cursor::new(bytes)).map_err(|e| malformed(format, e))?;
    let mut decoded = Vec::with_capacity(count);
    for (index, (data, entry)) in images.iter().zip(directory.entries()).enumerate() {
        let what = format!("the ICO's image {index}");
        let image = if data.starts_with(&PNG_SIGNATURE) {
            decode_png(data, format, &what)?
        } else {
            let image = entry
                .decode()
                .map_err(|e| malformed(format, format!("{what}: {e}")))?;
            Rgba {
                width: image.width(),
                height: image.height(),
                pixels: image.into_rgba_data(),
            }
        };
        decoded.push(image);
    }
    Ok(decoded)
}

/// The size a BMP image of an ICO has, from its BITMAPINFOHEADER (whose
/// height counts the colour rows and the mask's, so is twice the image's).
fn bmp_header_size(data: &[u8], what: &str) -> Result<Size, IconError> {
    let format = IconFormat::Ico;
    if data.len() < BMP_INFO_HEADER_BYTES {
        return Err(malformed(
            format,
            format!("{what} ends inside its BMP header"),
        ));
    }
    let header = u32::from_le_bytes([data[0], data[1], data[2], data[3]]);
    if header as usize != BMP_INFO_HEADER_BYTES {
        return Err(malformed(
            format,
            format!("{what} is neither a PNG nor a BMP with a 40-byte header"),
        ));
    }
    let width = i32::from_le_bytes([data[4], data[5], data[6], data[7]]);
    let doubled = i32::from_le_bytes([data[8], data[9], data[10], data[11]]);
    if width <= 0 || doubled <= 0 || doubled % 2 != 0 {
        return Err(malformed(
            format,
            format!("{what}'s BMP header says {width}×{doubled} (height doubled) pixels"),
        ));
    }
    Ok(Size {
        width: width.unsigned_abs(),
        height: (doubled / 2).unsigned_abs(),
    })
}

fn encode_png(image: &Rgba) -> Result<Vec<u8>, IconError> {
    let failed = |e: png::EncodingError| IconError::Encode {
        format: IconFormat::Png,
        reason: e.to_string(),
    };
    let mut out = Vec::new();
    let mut encoder = png::Encoder::new(&mut out, image.width, image.height);
    encoder.set_color(png::ColorType::Rgba);
    encoder.set_depth(png::BitDepth::Eight);
    let mut writer = encoder.write_header().map_err(failed)?;
    writer.write_image_data(&image.pixels).map_err(failed)?;
    writer.finish().map_err(failed)?;
    Ok(out)
}

/// An ICO of `image` at 32×32 and, when it is larger, at its own size.
fn ico_of(image: &Rgba) -> Result<Vec<u8>, IconError> {
    let failed = |e: std::io::Error| IconError::Encode {
        format: IconFormat::Ico,
        reason: e.to_string(),
    };
    let mut sides = vec![FEED_PNG_SIDE];
    let own = image.width.max(image.height);
    if own > FEED_PNG_SIDE {
        sides.push(own);
    }
    let mut directory = IconDir::new(ResourceType::Icon);
    for side in sides {
        let scaled = image.to_square(side);
        let icon = IconImage::from_rgba_data(side, side, scaled.pixels);
        directory.add_entry(IconDirEntry::encode(&icon).map_err(failed)?);
    }
    let mut out = Vec::new();
    directory.write(&mut out).map_err(failed)?;
    Ok(out)
}
