// Thumbs up and down under a finished reply: its owner's rating (PUT /api/v1/messages/<id>/feedback), the one
// pressed again taking it back. chat_messages.js puts them in the reply's footer from the history's `feedback`;
// a click changes them in place, so the focus stays on the button pressed.
(function () {
  "use strict";

  const CHOICES = [
    ["up", "thumbUp", "Good reply"],
    ["down", "thumbDown", "Bad reply"],
  ];

  function drawPressed(group, rating) {
    for (const control of group.querySelectorAll("button")) {
      control.setAttribute("aria-pressed", String(control.dataset.rating === rating));
    }
  }

  async function rate(message, rating, group) {
    const errorBox = window.ImpoChatPage.errorBox;
    errorBox.hidden = true;
    const result = await ImpoApi.call("PUT", `/api/v1/messages/${message.id}/feedback`, { rating });
    if (!result.ok) return ImpoUi.showError(errorBox, result.body);
    message.feedback = result.body.feedback;
    drawPressed(group, message.feedback);
  }

  function controls(message) {
    const group = document.createElement("span");
    group.className = "feedback";
    group.setAttribute("role", "group");
    group.setAttribute("aria-label", "Rate this reply");
    for (const [rating, icon, label] of CHOICES) {
      const choose = () => rate(message, message.feedback === rating ? null : rating, group);
      const control = ImpoUi.iconButton(icon, label, `feedback-${rating}`, choose);
      control.dataset.rating = rating;
      group.append(control);
    }
    drawPressed(group, message.feedback);
    return group;
  }

  window.ImpoFeedback = { controls };
})();
