// Words for tool cards: each tool's title and one-line summary from the registry (the page's #tool-words), its
// arguments as a short "name: value" line (the raw JSON stays behind Details), and an approval's deadline in
// relative words that keep up with the clock; and whether a tool takes "Always allow".
(function () {
  "use strict";

  const source = document.getElementById("tool-words");
  const words = source ? JSON.parse(source.textContent) : {};
  const SUMMARY_MAX = 80;
  const VALUE_MAX = 40;

  function title(name) {
    return (words[name] && words[name].title) || name;
  }

  function summary(name) {
    return (words[name] && words[name].summary) || "";
  }

  // Whether its owner may answer "Always allow for this tool" (the registry marks it).
  function alwaysAllowable(name) {
    return Boolean(words[name] && words[name].alwaysAllowable);
  }

  function shortValue(value) {
    const text = typeof value === "string" ? value : JSON.stringify(value);
    return text.length > VALUE_MAX ? `${text.slice(0, VALUE_MAX - 1)}…` : text;
  }

  // {"sound": "chime", "volume": 0.5} -> "sound: chime · volume: 0.5"; "" when there is nothing to say.
  function argumentSummary(input) {
    if (input === null || input === undefined || input === "") return "";
    if (typeof input !== "object" || Array.isArray(input)) return shortValue(input);
    const line = Object.entries(input)
      .map(([key, value]) => `${key}: ${shortValue(value)}`)
      .join(" · ");
    return line.length > SUMMARY_MAX ? `${line.slice(0, SUMMARY_MAX - 1)}…` : line;
  }

  // "in 14 min", "in 2 h 5 min", "in less than a minute".
  function untilWords(iso, now = Date.now()) {
    const minutes = Math.ceil((new Date(iso).getTime() - now) / 60000);
    if (minutes <= 1) return "in less than a minute";
    if (minutes < 60) return `in ${minutes} min`;
    const hours = Math.floor(minutes / 60);
    const rest = minutes % 60;
    return rest ? `in ${hours} h ${rest} min` : `in ${hours} h`;
  }

  // The approval card's deadline, kept current each half minute while it is on the page (the card's state already
  // says it waits for the person's approval: once is enough).
  function approvalNote(element, expiresAt) {
    const exact = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "short" }).format(new Date(expiresAt));
    element.title = `Denied at ${exact} if unanswered`;
    const draw = () => {
      element.textContent = `Denied automatically ${untilWords(expiresAt)} if unanswered.`;
    };
    draw();
    const timer = setInterval(() => (element.isConnected ? draw() : clearInterval(timer)), 30_000);
  }

  window.ImpoToolCards = { title, summary, alwaysAllowable, argumentSummary, untilWords, approvalNote };
})();
