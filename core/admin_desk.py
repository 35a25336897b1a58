"""Django admin as a reconciliation desk: read-only audit records and per-record resolve buttons.

The buttons post to a view of their own (never the change form), so resolving a record cannot also
save a stale copy of it over what a worker wrote meanwhile. Staff decisions reach the end user as
"resolved by staff"; who decided is kept in the admin log only.
"""

from collections.abc import Callable
from dataclasses import dataclass

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.urls import path, reverse
from django.views.decorators.http import require_POST

from core.errors import ApplicationError

STAFF_NOTE = "resolved by staff"


class ReadOnlyAdmin(admin.ModelAdmin):
    """An audit record: staff may read it; nobody edits, adds or deletes it through the admin."""

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


class ReadOnlyInline(admin.StackedInline):
    can_delete = False
    extra = 0

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@dataclass(frozen=True)
class DeskAction:
    name: str
    label: str
    confirm: str
    applies: Callable[[object], bool]
    # Does the work and returns the confirmation shown to staff, or None when nothing changed.
    run: Callable[[object, object], str | None]


class DeskActionsMixin:
    """Adds `desk_actions` to a ModelAdmin as buttons on each record's page."""

    change_form_template = "admin/desk_change_form.html"
    desk_actions: tuple[DeskAction, ...] = ()

    def get_urls(self):
        info = self.model._meta.app_label, self.model._meta.model_name
        desk = path(
            "<path:object_id>/desk/<str:action>/",
            self.admin_site.admin_view(require_POST(self.desk_view)),
            name="{}_{}_desk".format(*info),
        )
        return [desk, *super().get_urls()]

    def may_resolve(self, request) -> bool:
        meta = self.model._meta
        return request.user.has_perm(f"{meta.app_label}.change_{meta.model_name}")

    def desk_view(self, request, object_id, action):
        if not self.may_resolve(request):
            raise PermissionDenied
        chosen = next((a for a in self.desk_actions if a.name == action), None)
        obj = get_object_or_404(self.model, pk=object_id)
        if chosen is None or not chosen.applies(obj):
            self.message_user(request, "That action does not apply to this record (any more).", messages.WARNING)
        else:
            try:
                confirmation = chosen.run(request, obj)
            except ApplicationError as exc:
                self.message_user(request, exc.message, messages.WARNING)
                confirmation = ""
            if confirmation:
                self.log_change(request, obj, f"{chosen.label}: {confirmation}")
                self.message_user(request, confirmation, messages.SUCCESS)
            elif confirmation is None:
                self.message_user(request, "Nothing changed: the record was settled meanwhile.", messages.WARNING)
        meta = self.model._meta
        return HttpResponseRedirect(reverse(f"admin:{meta.app_label}_{meta.model_name}_change", args=[object_id]))

    def change_view(self, request, object_id, form_url="", extra_context=None):
        obj = self.get_object(request, object_id)
        buttons = []
        if obj is not None and self.may_resolve(request):
            meta = self.model._meta
            buttons = [
                {
                    "label": action.label,
                    "confirm": action.confirm,
                    "url": reverse(f"admin:{meta.app_label}_{meta.model_name}_desk", args=[object_id, action.name]),
                }
                for action in self.desk_actions
                if action.applies(obj)
            ]
        return super().change_view(request, object_id, form_url, {**(extra_context or {}), "desk_buttons": buttons})
