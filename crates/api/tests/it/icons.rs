//! The feed's icons through the public API: what passes as a PNG or an ICO,
//! what is refused and why (an image claiming 60000×60000 pixels before
//! anything is decoded), and the 32×32 PNG and the ICO derived from
//! whichever was given.

use api::feed::icons::{
    FEED_PNG_SIDE, IconError, IconFormat, MAX_ICO_IMAGES, MAX_ICON_BYTES, Size, check_ico,
    check_png, feed_icons,
};
use ico::{IconDir, IconDirEntry, IconImage, ResourceType};

fn size(width: u32, height: u32) -> Size {
    Size { width, height }
}

/// An RGBA image of `width`×`height`: opaque red left of the middle,
/// transparent right of it.
fn pixels(width: u32, height: u32) -> Vec<u8> {
    let mut out = Vec::new();
    for _ in 0..height {
        for x in 0..width {
            out.extend_from_slice(if x < width / 2 {
                &[255, 0, 0, 255]
            } else {
                &[0, 0, 255, 0]
            });
        }
    }
    out
}

fn png_of(
    width: u32,
    height: u32,
    color: png::ColorType,
    depth: png::BitDepth,
    data: &[u8],
) -> Vec<u8> {
    let mut out = Vec::new();
    let mut encoder = png::Encoder::new(&mut out, width, height);
    encoder.set_color(color);
    encoder.set_depth(depth);
    if color == png::ColorType::Indexed {
        encoder.set_palette(vec![255, 0, 0, 0, 255, 0]);
        encoder.set_trns(vec![255, 0]);
    }
    let mut writer = encoder.write_header().expect("header");
    writer.write_image_data(data).expect("data");
    writer.finish().expect("finish");
    out
}

fn rgba_png(width: u32, height: u32) -> Vec<u8> {
    png_of(
        width,
        height,
        png::ColorType::Rgba,
        png::BitDepth::Eight,
        &pixels(width, height),
    )
}

/// The PNG's decoded size and RGBA pixels, read back with the png crate.
fn decode(png_bytes: &[u8]) -> (Size, Vec<u8>) {
    let mut decoder = png::Decoder::new(std::io::Cursor::new(png_bytes));
    decoder.set_transformations(png::Transformations::EXPAND);
    let mut reader = decoder.read_info().expect("a PNG");
    let mut buffer = vec![0; reader.output_buffer_size().expect("size")];
    let frame = reader.next_frame(&mut buffer).expect("frame");
    assert_eq!(frame.color_type, png::ColorType::Rgba);
    buffer.truncate(frame.buffer_size());
    (size(frame.width, frame.height), buffer)
}

fn ico_of(images: &[(u32, bool)]) -> Vec<u8> {
    let mut dir = IconDir::new(ResourceType::Icon);
    for &(side, as_png) in images {
        let image = IconImage::from_rgba_data(side, side, pixels(side, side));
        let entry = if as_png {
            IconDirEntry::encode_as_png(&image)
        } else {
            IconDirEntry::encode_as_bmp(&image)
        };
        dir.add_entry(entry.expect("entry"));
    }
    let mut out = Vec::new();
    dir.write(&mut out).expect("write");
    out
}

/// CRC-32 (ISO 3309, as PNG's chunks use it).
fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &byte in bytes {
        crc ^= u32::from(byte);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xedb8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// A well-formed PNG of a few dozen bytes whose header claims
/// `width`×`height` pixels: signature, IHDR, an IDAT of nothing, IEND.
fn claiming(width: u32, height: u32) -> Vec<u8> {
    let mut out = vec![0x89, b'P', b'N', b'G', 0x0d, 0x0a, 0x1a, 0x0a];
    let mut chunk = |kind: &[u8], data: &[u8]| {
        out.extend_from_slice(&(data.len() as u32).to_be_bytes());
        let mut body = kind.to_vec();
        body.extend_from_slice(data);
        out.extend_from_slice(&body);
        out.extend_from_slice(&crc32(&body).to_be_bytes());
    };
    let mut ihdr = Vec::new();
    ihdr.extend_from_slice(&width.to_be_bytes());
    ihdr.extend_from_slice(&height.to_be_bytes());
    ihdr.extend_from_slice(&[8, 6, 0, 0, 0]);
    chunk(b"IHDR", &ihdr);
    chunk(b"IDAT", &[0x78, 0x9c, 0x03, 0x00, 0x00, 0x00, 0x00, 0x01]);
    chunk(b"IEND", &[]);
    out
}

#[test]
fn pngs_of_every_kind_up_to_256_pass() {
    assert_eq!(check_png(&rgba_png(32, 32)), Ok(size(32, 32)));
    assert_eq!(check_png(&rgba_png(256, 100)), Ok(size(256, 100)));
    let palette = png_of(
        4,
        2,
        png::ColorType::Indexed,
        png::BitDepth::Eight,
        &[0, 1, 0, 1, 1, 0, 1, 0],
    );
    assert_eq!(check_png(&palette), Ok(size(4, 2)));
    let gray16 = png_of(
        2,
        2,
        png::ColorType::Grayscale,
        png::BitDepth::Sixteen,
        &[0; 8],
    );
    assert_eq!(check_png(&gray16), Ok(size(2, 2)));
}

#[test]
fn a_png_claiming_60000_pixels_a_side_is_refused_from_its_header() {
    let bomb = claiming(60_000, 60_000);
    assert!(bomb.len() < 100, "a small file");
    match check_png(&bomb) {
        Err(IconError::TooLarge {
            format: IconFormat::Png,
            what,
            width: 60_000,
            height: 60_000,
        }) => assert_eq!(what, "the PNG"),
        other => panic!("{other:?}"),
    }
    // The same file claiming a small size is read further (and its empty
    // image data is then refused), so the size alone refused the first.
    assert!(matches!(
        check_png(&claiming(16, 16)),
        Err(IconError::Malformed { .. })
    ));
    let err = check_png(&claiming(257, 1)).unwrap_err();
    assert_eq!(
        err.to_string(),
        "the PNG is 257×1 pixels; an icon is at most 256×256"
    );
}

#[test]
fn broken_or_oversized_pngs_are_refused_saying_why() {
    let good = rgba_png(32, 32);
    for (bytes, reason) in [
        (b"GIF89a...".to_vec(), "signature"),
        (good[..20].to_vec(), "ends before its header"),
        (good[..good.len() - 20].to_vec(), ""),
        (claiming(0, 5), "0×5"),
    ] {
        match check_png(&bytes) {
            Err(IconError::Malformed {
                format: IconFormat::Png,
                reason: why,
            }) => {
                assert!(why.contains(reason), "{why}")
            }
            other => panic!("{reason}: {other:?}"),
        }
    }
    let mut corrupt = good.clone();
    let last_idat_byte = corrupt.len() - 16;
    corrupt[last_idat_byte] ^= 0xff;
    assert!(
        check_png(&corrupt).is_err(),
        "a checksum that does not match"
    );

    let big = vec![0u8; MAX_ICON_BYTES + 1];
    assert_eq!(
        check_png(&big),
        Err(IconError::TooManyBytes {
            format: IconFormat::Png,
            bytes: MAX_ICON_BYTES + 1
        })
    );
}

#[test]
fn icos_with_bmp_and_png_images_pass_with_each_size() {
    let ico = ico_of(&[(16, false), (32, false), (48, true), (256, true)]);
    assert_eq!(
        check_ico(&ico),
        Ok(vec![
            size(16, 16),
            size(32, 32),
            size(48, 48),
            size(256, 256)
        ])
    );
}

#[test]
fn icos_that_claim_too_much_or_are_not_icons_are_refused() {
    // One BMP image whose header claims 60000×60000 (height doubled).
    let mut bomb = vec![0, 0, 1, 0, 1, 0];
    bomb.extend_from_slice(&[0, 0, 0, 0, 1, 0, 32, 0]);
    bomb.extend_from_slice(&40u32.to_le_bytes());
    bomb.extend_from_slice(&22u32.to_le_bytes());
    bomb.extend_from_slice(&40u32.to_le_bytes());
    bomb.extend_from_slice(&60_000i32.to_le_bytes());
    bomb.extend_from_slice(&120_000i32.to_le_bytes());
    bomb.extend_from_slice(&[1, 0, 32, 0]);
    bomb.extend_from_slice(&[0; 24]);
    assert_eq!(
        check_ico(&bomb),
        Err(IconError::TooLarge {
            format: IconFormat::Ico,
            what: "the ICO's image 0".into(),
            width: 60_000,
            height: 60_000
        })
    );

    // A PNG image over the bound inside an ICO.
    let mut dir = IconDir::new(ResourceType::Icon);
    let big = IconImage::from_rgba_data(512, 512, pixels(512, 512));
    dir.add_entry(IconDirEntry::encode_as_png(&big).expect("entry"));
    let mut large = Vec::new();
    dir.write(&mut large).expect("write");
    assert!(matches!(
        check_ico(&large),
        Err(IconError::TooLarge { width: 512, .. })
    ));

    let good = ico_of(&[(32, false)]);
    let mut cursor = good.clone();
    cursor[2] = 2;
    let mut outside = good.clone();
    outside[18] = 0xff; // the image's offset, far past the end
    let mut many = good.clone();
    many[4] = (MAX_ICO_IMAGES + 1) as u8;
    for (bytes, reason) in [
        (cursor, "cursor"),
        (outside, "not inside the file"),
        (many, "holds 17 images"),
        (vec![0, 0, 1, 0, 0, 0], "holds 0 images"),
        (good[..good.len() - 10].to_vec(), "not inside the file"),
        (rgba_png(16, 16), "reserved"),
    ] {
        match check_ico(&bytes) {
            Err(IconError::Malformed {
                format: IconFormat::Ico,
                reason: why,
            }) => {
                assert!(why.contains(reason), "{reason}: {why}")
            }
            other => panic!("{reason}: {other:?}"),
        }
    }
}

#[test]
fn a_png_alone_gives_a_32_pixel_png_and_an_ico_of_it() {
    assert_eq!(feed_icons(None, None), Ok(None));

    let exact = rgba_png(32, 32);
    let icons = feed_icons(Some(&exact), None).unwrap().unwrap();
    assert_eq!(icons.png_32, exact, "a 32×32 PNG is served as given");
    assert_eq!(check_ico(&icons.ico), Ok(vec![size(32, 32)]));

    // A larger, non-square PNG: centred on a square, scaled down.
    let wide = rgba_png(128, 64);
    let icons = feed_icons(Some(&wide), None).unwrap().unwrap();
    let (png_size, rgba) = decode(&icons.png_32);
    assert_eq!(png_size, size(FEED_PNG_SIDE, FEED_PNG_SIDE));
    let at = |x: usize, y: usize| &rgba[(y * 32 + x) * 4..(y * 32 + x) * 4 + 4];
    assert_eq!(
        at(0, 0),
        [0, 0, 0, 0],
        "the band above the image is transparent"
    );
    assert_eq!(at(4, 16), [255, 0, 0, 255], "the red half stays red");
    assert_eq!(at(28, 16)[3], 0, "the transparent half stays transparent");
    assert_eq!(
        check_ico(&icons.ico),
        Ok(vec![size(32, 32), size(128, 128)])
    );

    // An odd width: the middle new pixel covers red and transparent old
    // ones, and takes the red's colour with part of its opacity (no blue
    // bleeds from the transparent pixels).
    let odd = feed_icons(Some(&rgba_png(33, 33)), None).unwrap().unwrap();
    let (_, rgba) = decode(&odd.png_32);
    let middle = &rgba[(16 * 32 + 15) * 4..(16 * 32 + 15) * 4 + 4];
    assert_eq!(middle[..3], [255, 0, 0], "{middle:?}");
    assert!(middle[3] > 100 && middle[3] < 160, "{middle:?}");

    // A smaller one is scaled up.
    let small = rgba_png(16, 16);
    let icons = feed_icons(Some(&small), None).unwrap().unwrap();
    assert_eq!(decode(&icons.png_32).0, size(32, 32));
    assert_eq!(check_ico(&icons.ico), Ok(vec![size(32, 32)]));
}

#[test]
fn an_ico_alone_gives_a_png_from_its_nearest_image() {
    let ico = ico_of(&[(16, false), (48, true), (32, false), (256, true)]);
    let icons = feed_icons(None, Some(&ico)).unwrap().unwrap();
    assert_eq!(icons.ico, ico, "the ICO is served as given");
    let (png_size, rgba) = decode(&icons.png_32);
    assert_eq!(png_size, size(32, 32));
    assert_eq!(&rgba[..4], [255, 0, 0, 255]);

    // Without a 32×32 image, the smallest larger one, scaled down.
    let icons = feed_icons(None, Some(&ico_of(&[(16, false), (256, true), (64, true)])))
        .unwrap()
        .unwrap();
    assert_eq!(decode(&icons.png_32).0, size(32, 32));
    // Only smaller ones: the largest, scaled up.
    let icons = feed_icons(None, Some(&ico_of(&[(16, false), (24, false)])))
        .unwrap()
        .unwrap();
    assert_eq!(decode(&icons.png_32).0, size(32, 32));
}

#[test]
fn both_given_are_both_checked() {
    let png = rgba_png(64, 64);
    let ico = ico_of(&[(32, false)]);
    let icons = feed_icons(Some(&png), Some(&ico)).unwrap().unwrap();
    assert_eq!(icons.ico, ico);
    assert_eq!(decode(&icons.png_32).0, size(32, 32));

    let err = feed_icons(Some(&png), Some(b"not an icon")).unwrap_err();
    assert!(matches!(err, IconError::Malformed { .. }), "{err:?}");
    assert_eq!(err.format(), IconFormat::Ico, "the caller names iconIco");
    let err = feed_icons(Some(&claiming(60_000, 60_000)), Some(&ico)).unwrap_err();
    assert!(matches!(err, IconError::TooLarge { .. }), "{err:?}");
    assert_eq!(err.format(), IconFormat::Png, "the caller names iconPng");
}
