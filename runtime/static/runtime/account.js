// Deleting the account from its page: the password confirms it (DELETE /api/v1/account with {password}); a wrong
// one is said beside the field. Once deleted, the page logs out (which also forgets commands left unanswered here).
(function () {
  "use strict";

  const form = document.getElementById("delete-account");
  const password = document.getElementById("delete-password");
  const problem = document.getElementById("delete-account-error");
  if (!form) return;

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    problem.hidden = true;
    password.removeAttribute("aria-invalid");
    if (!password.value) {
      problem.textContent = "Type your password to confirm.";
      problem.hidden = false;
      password.setAttribute("aria-invalid", "true");
      password.focus();
      return;
    }
    if (!confirm("Delete your account and everything in it, for good?")) return;
    const result = await ImpoApi.call("DELETE", "/api/v1/account", { password: password.value });
    if (!result.ok) {
      password.setAttribute("aria-invalid", "true");
      if (result.body && result.body.error && result.body.error.code === "password_incorrect") {
        problem.textContent = "That is not your password. Nothing was deleted.";
        problem.hidden = false;
      } else {
        ImpoUi.showError(problem, result.body);
      }
      password.focus();
      return;
    }
    document.getElementById("logout").requestSubmit();
  });
})();
