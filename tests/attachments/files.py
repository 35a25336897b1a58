"""Files the attachment tests upload, made by the libraries Impo reads them with, and the client's side of the
prepare → PUT → complete contract (docs/api.md "Attachments")."""

import hashlib
import io
import uuid

import docx
import pypdf
from PIL import ExifTags, Image

# What an executable starts with: an ELF header, then bytes no image format begins with.
EXECUTABLE = b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)) * 8


def png(width=64, height=48, color=(200, 30, 30)) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), color).save(out, format="PNG")
    return out.getvalue()


def jpeg_with_gps_rotated(width=300, height=100) -> bytes:
    """A JPEG whose EXIF holds a GPS position and says the camera was turned (orientation 6: rotate 90° on view)."""
    exif = Image.Exif()
    exif[ExifTags.Base.Orientation] = 6
    exif[ExifTags.Base.Make] = "PhoneMaker"
    exif[ExifTags.IFD.GPSInfo] = {
        ExifTags.GPS.GPSLatitudeRef: "N",
        ExifTags.GPS.GPSLatitude: (52.0, 31.0, 12.0),
        ExifTags.GPS.GPSLongitudeRef: "E",
        ExifTags.GPS.GPSLongitude: (13.0, 24.0, 36.0),
    }
    out = io.BytesIO()
    Image.new("RGB", (width, height), (10, 120, 200)).save(out, format="JPEG", exif=exif)
    return out.getvalue()


def _pdf_object_stream(text: str) -> bytes:
    return f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET".encode()


def pdf(*pages: str) -> bytes:
    """A PDF with one line of text on each page (Helvetica), written with pypdf."""
    writer = pypdf.PdfWriter()
    font = writer._add_object(
        pypdf.generic.DictionaryObject(
            {
                pypdf.generic.NameObject("/Type"): pypdf.generic.NameObject("/Font"),
                pypdf.generic.NameObject("/Subtype"): pypdf.generic.NameObject("/Type1"),
                pypdf.generic.NameObject("/BaseFont"): pypdf.generic.NameObject("/Helvetica"),
            }
        )
    )
    for text in pages:
        page = writer.add_blank_page(width=612, height=792)
        stream = pypdf.generic.DecodedStreamObject()
        stream.set_data(_pdf_object_stream(text))
        page[pypdf.generic.NameObject("/Contents")] = writer._add_object(stream)
        page[pypdf.generic.NameObject("/Resources")] = pypdf.generic.DictionaryObject(
            {pypdf.generic.NameObject("/Font"): pypdf.generic.DictionaryObject({pypdf.generic.NameObject("/F1"): font})}
        )
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def encrypted_pdf() -> bytes:
    writer = pypdf.PdfWriter(clone_from=pypdf.PdfReader(io.BytesIO(pdf("secret"))))
    writer.encrypt(user_password="pw", owner_password="owner")
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def word(*paragraphs: str) -> bytes:
    document = docx.Document()
    for paragraph in paragraphs:
        document.add_paragraph(paragraph)
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def manifest(data: bytes, name: str, media_type: str, /, **changes) -> dict:
    return {
        "id": str(uuid.uuid4()),
        "name": name,
        "mediaType": media_type,
        "sizeBytes": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
        **changes,
    }


def prepare(api, sent: dict):
    return api.post("/api/v1/attachments/prepare", sent, format="json")


def put(client, upload: dict, data: bytes):
    """PUTs the bytes as a client does: to the URL, with exactly the headers it was given."""
    path = upload["url"].split("://", 1)[1].partition("/")[2]
    headers = {f"HTTP_{name.upper().replace('-', '_')}": value for name, value in upload["headers"].items()}
    headers.pop("HTTP_CONTENT_TYPE")
    return client.put(f"/{path}", data, content_type=upload["headers"]["Content-Type"], **headers)


def complete(api, attachment_id: str):
    return api.post(f"/api/v1/attachments/{attachment_id}/complete", {}, format="json")


def upload(api, data: bytes, name: str, media_type: str):
    """prepare → PUT → complete; returns complete's answer."""
    sent = manifest(data, name, media_type)
    prepared = prepare(api, sent)
    assert prepared.status_code == 200, prepared.json()
    assert put(api, prepared.json()["upload"], data).status_code == 204
    return complete(api, sent["id"])
