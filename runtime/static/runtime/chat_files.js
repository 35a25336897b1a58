// The files a user message carries (docs/design.md §12): its history `parts` (`data-instant-file`, docs/api.md
// "Attachments"), drawn above its text: an image as a thumbnail that opens the whole image in a dialog, a document
// as a chip with its name and size that downloads it. Both come from `GET /api/v1/files/upload_<id>`, the owner's
// own bytes, same-origin.
(function () {
  "use strict";

  let viewer = null;

  // Sizes as people read them: 1 KB is 1024 bytes, so the 10 MiB limit reads "10 MB".
  function humanSize(bytes) {
    if (bytes < 1024) return `${bytes} bytes`;
    const [value, unit] = bytes < 1024 * 1024 ? [bytes / 1024, "KB"] : [bytes / (1024 * 1024), "MB"];
    return `${Number(value.toFixed(value < 10 ? 1 : 0))} ${unit}`;
  }

  function fileUrl(fileId) {
    return `/api/v1/files/${encodeURIComponent(fileId)}`;
  }

  function isImage(mediaType) {
    return mediaType.startsWith("image/");
  }

  function partsOf(message) {
    return (message.parts || []).filter((part) => part.type === "data-instant-file");
  }

  function draw(node, message) {
    const parts = partsOf(message);
    const drawn = parts.map((part) => part.id).join(" ");
    if (node.drawnFiles === drawn) return;
    node.drawnFiles = drawn;
    if (!node.files) {
      node.files = document.createElement("ul");
      node.files.className = "files";
      node.files.setAttribute("aria-label", "Attached files");
      node.body.before(node.files);
    }
    node.files.hidden = parts.length === 0;
    node.files.replaceChildren(...parts.map((part) => fileItem(part.data)));
  }

  function fileItem(file) {
    const item = document.createElement("li");
    const link = document.createElement("a");
    link.href = fileUrl(file.fileId);
    if (isImage(file.mediaType)) {
      item.className = "file file-image";
      const image = document.createElement("img");
      image.src = fileUrl(file.fileId);
      image.alt = file.name;
      image.loading = "lazy";
      link.title = `${file.name}, ${humanSize(file.sizeBytes)}`;
      link.append(image);
      link.addEventListener("click", (event) => {
        event.preventDefault();
        openViewer(file, link);
      });
    } else {
      item.className = "file file-document";
      link.download = file.name;
      link.title = `${file.name}, ${humanSize(file.sizeBytes)}`;
      link.append(fileChip(file.name, humanSize(file.sizeBytes)));
    }
    item.append(link);
    return item;
  }

  // A document's face, here and in the composer's previews: its kind (the extension), name and size.
  function fileChip(name, size) {
    const chip = document.createElement("span");
    chip.className = "file-chip";
    const kind = document.createElement("span");
    kind.className = "file-kind";
    kind.setAttribute("aria-hidden", "true");
    kind.textContent = name.includes(".") ? name.split(".").pop().slice(0, 4).toUpperCase() : "FILE";
    const label = document.createElement("span");
    label.className = "file-name";
    label.textContent = name;
    const bytes = document.createElement("span");
    bytes.className = "file-size";
    bytes.textContent = size;
    chip.append(kind, label, bytes);
    return chip;
  }

  // The whole image over the page: Escape, Close or a click beside it close it, and the focus goes back.
  function openViewer(file, opener) {
    if (!viewer) {
      viewer = document.createElement("dialog");
      viewer.className = "file-viewer";
      viewer.addEventListener("click", (event) => {
        if (event.target === viewer) viewer.close();
      });
      document.body.append(viewer);
    }
    viewer.setAttribute("aria-label", file.name);
    const bar = document.createElement("div");
    bar.className = "file-viewer-bar";
    const title = document.createElement("span");
    title.className = "file-name";
    title.textContent = file.name;
    const download = document.createElement("a");
    download.href = fileUrl(file.fileId);
    download.download = file.name;
    download.textContent = "Download";
    const close = document.createElement("button");
    close.type = "button";
    close.className = "secondary";
    close.textContent = "Close";
    close.addEventListener("click", () => viewer.close());
    bar.append(title, download, close);
    const image = document.createElement("img");
    image.src = fileUrl(file.fileId);
    image.alt = file.name;
    viewer.replaceChildren(bar, image);
    viewer.onclose = () => opener.focus();
    viewer.showModal();
    close.focus();
  }

  window.ImpoChatFiles = { humanSize, isImage, fileChip, draw };
})();
